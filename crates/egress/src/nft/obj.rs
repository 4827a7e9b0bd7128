//! Owned libnftnl objects (table, chain, set, set element, rule, expression)
//! with safe setters and getters. This is the only place that allocates
//! and frees libnftnl objects; everything above works with these wrappers.

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr::NonNull;

use nftnl_sys as sys;

use super::NftError;
use super::limits::{DATA_MAX, check_data_len};

/// Turn a name into a C string (names are validated upstream; a NUL byte
/// would be a bug there, so it is reported rather than truncated).
pub(crate) fn cstr(s: &str) -> Result<CString, NftError> {
    CString::new(s).map_err(|_| NftError::BadName(s.to_owned()))
}

fn nonnull<T>(p: *mut T, what: &'static str) -> Result<NonNull<T>, NftError> {
    NonNull::new(p).ok_or(NftError::Alloc(what))
}

/// Read a C string owned by a libnftnl object into an owned `String`.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string valid for the call.
unsafe fn owned_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

macro_rules! owned {
    ($name:ident, $raw:ty, $alloc:path, $free:path, $what:literal) => {
        #[doc = concat!("An owned `", $what, "`.")]
        pub(crate) struct $name(NonNull<$raw>);

        impl $name {
            /// Allocate an empty object.
            pub(crate) fn new() -> Result<Self, NftError> {
                // SAFETY: the allocator takes no arguments; null is checked.
                nonnull(unsafe { $alloc() }, $what).map(Self)
            }

            /// The raw pointer, valid while `self` lives.
            pub(crate) fn as_ptr(&self) -> *mut $raw {
                self.0.as_ptr()
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: we own the object and free it exactly once.
                unsafe { $free(self.0.as_ptr()) }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($what)
            }
        }
    };
}

owned!(
    Table,
    sys::nftnl_table,
    sys::nftnl_table_alloc,
    sys::nftnl_table_free,
    "nftnl_table"
);
owned!(
    Chain,
    sys::nftnl_chain,
    sys::nftnl_chain_alloc,
    sys::nftnl_chain_free,
    "nftnl_chain"
);
owned!(
    Set,
    sys::nftnl_set,
    sys::nftnl_set_alloc,
    sys::nftnl_set_free,
    "nftnl_set"
);
owned!(
    Rule,
    sys::nftnl_rule,
    sys::nftnl_rule_alloc,
    sys::nftnl_rule_free,
    "nftnl_rule"
);

impl Table {
    pub(crate) fn set_str(&mut self, attr: u32, v: &CStr) {
        // SAFETY: valid object; libnftnl copies the string.
        unsafe { sys::nftnl_table_set_str(self.as_ptr(), attr as u16, v.as_ptr()) };
    }
    pub(crate) fn set_u32(&mut self, attr: u32, v: u32) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_table_set_u32(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn get_str(&self, attr: u32) -> String {
        // SAFETY: valid object; the returned string lives as long as it.
        unsafe { owned_str(sys::nftnl_table_get_str(self.as_ptr(), attr as u16)) }
    }
    pub(crate) fn get_u32(&self, attr: u32) -> u32 {
        // SAFETY: valid object; an unset attribute reads as 0.
        unsafe { sys::nftnl_table_get_u32(self.as_ptr(), attr as u16) }
    }
}

impl Chain {
    pub(crate) fn set_str(&mut self, attr: u32, v: &CStr) {
        // SAFETY: valid object; libnftnl copies the string.
        unsafe { sys::nftnl_chain_set_str(self.as_ptr(), attr as u16, v.as_ptr()) };
    }
    pub(crate) fn set_u32(&mut self, attr: u32, v: u32) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_chain_set_u32(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn set_s32(&mut self, attr: u32, v: i32) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_chain_set_s32(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn is_set(&self, attr: u32) -> bool {
        // SAFETY: valid object.
        unsafe { sys::nftnl_chain_is_set(self.as_ptr(), attr as u16) }
    }
    pub(crate) fn get_str(&self, attr: u32) -> String {
        // SAFETY: valid object; the returned string lives as long as it.
        unsafe { owned_str(sys::nftnl_chain_get_str(self.as_ptr(), attr as u16)) }
    }
    pub(crate) fn get_u32(&self, attr: u32) -> u32 {
        // SAFETY: valid object.
        unsafe { sys::nftnl_chain_get_u32(self.as_ptr(), attr as u16) }
    }
    pub(crate) fn get_s32(&self, attr: u32) -> i32 {
        // SAFETY: valid object.
        unsafe { sys::nftnl_chain_get_s32(self.as_ptr(), attr as u16) }
    }
}

impl Set {
    pub(crate) fn set_str(&mut self, attr: u32, v: &CStr) {
        // SAFETY: valid object; libnftnl copies the string.
        unsafe { sys::nftnl_set_set_str(self.as_ptr(), attr as u16, v.as_ptr()) };
    }
    pub(crate) fn set_u32(&mut self, attr: u32, v: u32) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_set_set_u32(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn set_u64(&mut self, attr: u32, v: u64) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_set_set_u64(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn get_u64(&self, attr: u32) -> u64 {
        // SAFETY: valid object; an unset attribute reads as 0.
        unsafe { sys::nftnl_set_get_u64(self.as_ptr(), attr as u16) }
    }
    pub(crate) fn set_data(&mut self, attr: u32, v: &[u8]) {
        // SAFETY: valid object; libnftnl copies `v.len()` bytes.
        unsafe {
            sys::nftnl_set_set_data(
                self.as_ptr(),
                attr as u16,
                v.as_ptr().cast::<c_void>(),
                v.len() as u32,
            )
        };
    }
    /// A byte attribute (empty when unset).
    pub(crate) fn get_data(&self, attr: u32) -> Vec<u8> {
        let mut len: u32 = 0;
        // SAFETY: valid object; the returned bytes live as long as it and
        // are copied before it can change.
        unsafe {
            let p = sys::nftnl_set_get_data(self.as_ptr(), attr as u16, &mut len);
            if p.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len as usize).to_vec()
            }
        }
    }
    pub(crate) fn get_str(&self, attr: u32) -> String {
        // SAFETY: valid object; the returned string lives as long as it.
        unsafe { owned_str(sys::nftnl_set_get_str(self.as_ptr(), attr as u16)) }
    }
    pub(crate) fn get_u32(&self, attr: u32) -> u32 {
        // SAFETY: valid object.
        unsafe { sys::nftnl_set_get_u32(self.as_ptr(), attr as u16) }
    }

    /// Append one element with `key` and optional flags; the set takes
    /// ownership of the element.
    pub(crate) fn add_elem(&mut self, key: &[u8], flags: Option<u32>) -> Result<(), NftError> {
        self.add_elem_timeout(key, flags, None)
    }

    /// Append one element with `key`, optional flags and an optional
    /// timeout of its own (milliseconds); the set takes ownership of it.
    pub(crate) fn add_elem_timeout(
        &mut self,
        key: &[u8],
        flags: Option<u32>,
        timeout_ms: Option<u64>,
    ) -> Result<(), NftError> {
        self.check_key(key)?;
        // SAFETY: allocation; null is checked below.
        let elem = nonnull(unsafe { sys::nftnl_set_elem_alloc() }, "nftnl_set_elem")?;
        // SAFETY: `elem` is valid; libnftnl copies `key`, whose length was
        // checked against its DATA_MAX-byte key buffer above; the set takes
        // ownership of `elem` in nftnl_set_elem_add and frees it with the set.
        unsafe {
            if sys::nftnl_set_elem_set(
                elem.as_ptr(),
                sys::NFTNL_SET_ELEM_KEY as u16,
                key.as_ptr().cast::<c_void>(),
                key.len() as u32,
            ) < 0
            {
                sys::nftnl_set_elem_free(elem.as_ptr());
                return Err(self.key_error(key.len(), format!("at most {DATA_MAX}")));
            }
            if let Some(f) = flags {
                sys::nftnl_set_elem_set_u32(elem.as_ptr(), sys::NFTNL_SET_ELEM_FLAGS as u16, f);
            }
            if let Some(t) = timeout_ms {
                sys::nftnl_set_elem_set_u64(elem.as_ptr(), sys::NFTNL_SET_ELEM_TIMEOUT as u16, t);
            }
            sys::nftnl_set_elem_add(self.as_ptr(), elem.as_ptr());
        }
        Ok(())
    }

    /// Append one element of a verdict map: `key`, optional flags and,
    /// for an element that is not an interval's end, `jump chain`.
    pub(crate) fn add_elem_jump(
        &mut self,
        key: &[u8],
        flags: Option<u32>,
        chain: Option<&CStr>,
    ) -> Result<(), NftError> {
        self.check_key(key)?;
        // SAFETY: allocation; null is checked below.
        let elem = nonnull(unsafe { sys::nftnl_set_elem_alloc() }, "nftnl_set_elem")?;
        // SAFETY: `elem` is valid; libnftnl copies `key`, whose length was
        // checked against its DATA_MAX-byte key buffer above, and the chain
        // name; the set takes ownership of `elem` in nftnl_set_elem_add and
        // frees it with the set.
        unsafe {
            if sys::nftnl_set_elem_set(
                elem.as_ptr(),
                sys::NFTNL_SET_ELEM_KEY as u16,
                key.as_ptr().cast::<c_void>(),
                key.len() as u32,
            ) < 0
            {
                sys::nftnl_set_elem_free(elem.as_ptr());
                return Err(self.key_error(key.len(), format!("at most {DATA_MAX}")));
            }
            if let Some(f) = flags {
                sys::nftnl_set_elem_set_u32(elem.as_ptr(), sys::NFTNL_SET_ELEM_FLAGS as u16, f);
            }
            if let Some(c) = chain {
                sys::nftnl_set_elem_set_u32(
                    elem.as_ptr(),
                    sys::NFTNL_SET_ELEM_VERDICT as u16,
                    libc::NFT_JUMP as u32,
                );
                sys::nftnl_set_elem_set_str(
                    elem.as_ptr(),
                    sys::NFTNL_SET_ELEM_CHAIN as u16,
                    c.as_ptr(),
                );
            }
            sys::nftnl_set_elem_add(self.as_ptr(), elem.as_ptr());
        }
        Ok(())
    }

    /// An element key must fit libnftnl's buffer and, when this set object
    /// declares its key length, have exactly that length (the kernel would
    /// otherwise refuse it, or worse, match on a truncated key).
    pub(crate) fn check_key(&self, key: &[u8]) -> Result<(), NftError> {
        check_data_len(|| self.key_what(), key.len())?;
        // SAFETY: valid object.
        let declared =
            unsafe { sys::nftnl_set_is_set(self.as_ptr(), sys::NFTNL_SET_KEY_LEN as u16) };
        if declared {
            let want = self.get_u32(sys::NFTNL_SET_KEY_LEN) as usize;
            if key.len() != want {
                return Err(self.key_error(key.len(), want.to_string()));
            }
        }
        Ok(())
    }

    /// Every element of a verdict map as (key bytes, flags, the chain its
    /// verdict jumps to; empty for an interval's end).
    pub(crate) fn jump_elems(&self) -> Result<Vec<(Vec<u8>, u32, String)>, NftError> {
        let mut out = Vec::new();
        // SAFETY: valid set; the iterator is destroyed before returning and
        // the element pointers it yields are owned by the set.
        unsafe {
            let iter = nonnull(
                sys::nftnl_set_elems_iter_create(self.as_ptr()),
                "nftnl_set_elems_iter",
            )?;
            let mut e = sys::nftnl_set_elems_iter_next(iter.as_ptr());
            while !e.is_null() {
                let mut len: u32 = 0;
                let key = sys::nftnl_set_elem_get(e, sys::NFTNL_SET_ELEM_KEY as u16, &mut len);
                let flags = if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_FLAGS as u16) {
                    sys::nftnl_set_elem_get_u32(e, sys::NFTNL_SET_ELEM_FLAGS as u16)
                } else {
                    0
                };
                let chain = if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_CHAIN as u16) {
                    owned_str(sys::nftnl_set_elem_get_str(
                        e,
                        sys::NFTNL_SET_ELEM_CHAIN as u16,
                    ))
                } else {
                    String::new()
                };
                let bytes = if key.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(key.cast::<u8>(), len as usize).to_vec()
                };
                out.push((bytes, flags, chain));
                e = sys::nftnl_set_elems_iter_next(iter.as_ptr());
            }
            sys::nftnl_set_elems_iter_destroy(iter.as_ptr());
        }
        Ok(out)
    }

    fn key_what(&self) -> String {
        format!(
            "the key of an element of set {}",
            self.get_str(sys::NFTNL_SET_NAME)
        )
    }

    fn key_error(&self, len: usize, expected: String) -> NftError {
        NftError::DataLength {
            what: self.key_what(),
            len,
            expected,
        }
    }

    /// Every element as (key bytes, flags, milliseconds until it expires;
    /// 0 when it does not).
    pub(crate) fn elems(&self) -> Result<Vec<(Vec<u8>, u32, u64)>, NftError> {
        let mut out = Vec::new();
        // SAFETY: valid set; the iterator is destroyed before returning and
        // the element pointers it yields are owned by the set.
        unsafe {
            let iter = nonnull(
                sys::nftnl_set_elems_iter_create(self.as_ptr()),
                "nftnl_set_elems_iter",
            )?;
            let mut e = sys::nftnl_set_elems_iter_next(iter.as_ptr());
            while !e.is_null() {
                let mut len: u32 = 0;
                let key = sys::nftnl_set_elem_get(e, sys::NFTNL_SET_ELEM_KEY as u16, &mut len);
                let flags = if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_FLAGS as u16) {
                    sys::nftnl_set_elem_get_u32(e, sys::NFTNL_SET_ELEM_FLAGS as u16)
                } else {
                    0
                };
                let expires =
                    if sys::nftnl_set_elem_is_set(e, sys::NFTNL_SET_ELEM_EXPIRATION as u16) {
                        sys::nftnl_set_elem_get_u64(e, sys::NFTNL_SET_ELEM_EXPIRATION as u16)
                    } else {
                        0
                    };
                let bytes = if key.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(key.cast::<u8>(), len as usize).to_vec()
                };
                out.push((bytes, flags, expires));
                e = sys::nftnl_set_elems_iter_next(iter.as_ptr());
            }
            sys::nftnl_set_elems_iter_destroy(iter.as_ptr());
        }
        Ok(out)
    }
}

impl Rule {
    pub(crate) fn set_str(&mut self, attr: u32, v: &CStr) {
        // SAFETY: valid object; libnftnl copies the string.
        unsafe { sys::nftnl_rule_set_str(self.as_ptr(), attr as u16, v.as_ptr()) };
    }
    pub(crate) fn set_u32(&mut self, attr: u32, v: u32) {
        // SAFETY: valid object.
        unsafe { sys::nftnl_rule_set_u32(self.as_ptr(), attr as u16, v) };
    }
    pub(crate) fn get_str(&self, attr: u32) -> String {
        // SAFETY: valid object; the returned string lives as long as it.
        unsafe { owned_str(sys::nftnl_rule_get_str(self.as_ptr(), attr as u16)) }
    }
    pub(crate) fn get_u64(&self, attr: u32) -> u64 {
        // SAFETY: valid object.
        unsafe { sys::nftnl_rule_get_u64(self.as_ptr(), attr as u16) }
    }

    /// Append an expression; the rule takes ownership of it.
    pub(crate) fn push(&mut self, e: Expr) {
        let raw = e.into_raw();
        // SAFETY: valid rule and expression; the rule owns the expression
        // from here on and frees it with itself.
        unsafe { sys::nftnl_rule_add_expr(self.as_ptr(), raw) };
    }

    /// Visit every expression of the rule in order.
    pub(crate) fn for_each_expr(&self, mut f: impl FnMut(ExprRef<'_>)) -> Result<(), NftError> {
        // SAFETY: valid rule; the iterator is destroyed before returning and
        // the expressions it yields are owned by the rule, which outlives
        // every `ExprRef` handed to `f` (they cannot escape the closure call).
        unsafe {
            let iter = nonnull(
                sys::nftnl_expr_iter_create(self.as_ptr()),
                "nftnl_expr_iter",
            )?;
            let mut e = sys::nftnl_expr_iter_next(iter.as_ptr());
            while let Some(p) = NonNull::new(e) {
                f(ExprRef {
                    raw: p,
                    _rule: std::marker::PhantomData,
                });
                e = sys::nftnl_expr_iter_next(iter.as_ptr());
            }
            sys::nftnl_expr_iter_destroy(iter.as_ptr());
        }
        Ok(())
    }
}

/// An owned expression not yet added to a rule.
pub(crate) struct Expr(NonNull<sys::nftnl_expr>);

impl Expr {
    /// Allocate an expression of type `name` (`meta`, `cmp`, ...).
    pub(crate) fn new(name: &CStr) -> Result<Self, NftError> {
        // SAFETY: `name` is NUL-terminated; null is checked.
        nonnull(
            unsafe { sys::nftnl_expr_alloc(name.as_ptr()) },
            "nftnl_expr",
        )
        .map(Self)
    }

    pub(crate) fn u32(mut self, attr: u32, v: u32) -> Self {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_set_u32(self.0.as_mut(), attr as u16, v) };
        self
    }

    pub(crate) fn u64(mut self, attr: u32, v: u64) -> Self {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_set_u64(self.0.as_mut(), attr as u16, v) };
        self
    }

    /// Hands `inner` to this expression (a dynset's per-element
    /// expression); this expression owns and frees it from here on.
    pub(crate) fn nest(mut self, attr: u32, inner: Expr) -> Self {
        let raw = inner.into_raw();
        // SAFETY: valid expressions; for a dynset's expression attribute
        // libnftnl takes the pointer itself as the value and links the
        // inner expression into its list, freeing it with the outer one.
        unsafe { sys::nftnl_expr_set(self.0.as_mut(), attr as u16, raw.cast::<c_void>(), 0) };
        self
    }

    pub(crate) fn u16(mut self, attr: u32, v: u16) -> Self {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_set_u16(self.0.as_mut(), attr as u16, v) };
        self
    }

    pub(crate) fn u8(mut self, attr: u32, v: u8) -> Self {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_set_u8(self.0.as_mut(), attr as u16, v) };
        self
    }

    pub(crate) fn str(mut self, attr: u32, v: &CStr) -> Self {
        // SAFETY: valid expression; libnftnl copies the string.
        unsafe { sys::nftnl_expr_set_str(self.0.as_mut(), attr as u16, v.as_ptr()) };
        self
    }

    /// Set a byte attribute (compare data, bitwise mask and xor): at most
    /// DATA_MAX bytes, the buffer libnftnl copies them into.
    pub(crate) fn data(mut self, attr: u32, v: &[u8]) -> Result<Self, NftError> {
        let what = || format!("the data (attribute {attr}) of an expression");
        check_data_len(what, v.len())?;
        // SAFETY: valid expression; libnftnl copies `v`, whose length was
        // checked against its DATA_MAX-byte buffer above.
        let rc = unsafe {
            sys::nftnl_expr_set(
                self.0.as_mut(),
                attr as u16,
                v.as_ptr().cast::<c_void>(),
                v.len() as u32,
            )
        };
        if rc < 0 {
            return Err(NftError::DataLength {
                what: what(),
                len: v.len(),
                expected: format!("what libnftnl accepts for attribute {attr}"),
            });
        }
        Ok(self)
    }

    fn into_raw(self) -> *mut sys::nftnl_expr {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for Expr {
    fn drop(&mut self) {
        // SAFETY: an expression not handed to a rule is still ours to free.
        unsafe { sys::nftnl_expr_free(self.0.as_ptr()) }
    }
}

/// A borrowed expression inside a rule.
pub(crate) struct ExprRef<'a> {
    raw: NonNull<sys::nftnl_expr>,
    _rule: std::marker::PhantomData<&'a Rule>,
}

impl ExprRef<'_> {
    /// The raw pointer, valid while the rule holding it lives.
    pub(crate) fn as_ptr(&self) -> *const sys::nftnl_expr {
        self.raw.as_ptr()
    }

    /// The expression type name (`meta`, `counter`, ...).
    pub(crate) fn name(&self) -> String {
        // SAFETY: valid expression owned by a live rule.
        unsafe {
            owned_str(sys::nftnl_expr_get_str(
                self.raw.as_ptr(),
                sys::NFTNL_EXPR_NAME as u16,
            ))
        }
    }

    pub(crate) fn is_set(&self, attr: u32) -> bool {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_is_set(self.raw.as_ptr(), attr as u16) }
    }

    pub(crate) fn get_u64(&self, attr: u32) -> u64 {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_get_u64(self.raw.as_ptr(), attr as u16) }
    }

    pub(crate) fn get_u32(&self, attr: u32) -> u32 {
        // SAFETY: valid expression.
        unsafe { sys::nftnl_expr_get_u32(self.raw.as_ptr(), attr as u16) }
    }

    /// libnftnl's default text form of the expression body.
    pub(crate) fn text(&self) -> String {
        let mut buf = vec![0u8; 1024];
        // SAFETY: `buf` is writable for its whole length; snprintf writes
        // at most `len` bytes including the terminating NUL.
        let n = unsafe {
            sys::nftnl_expr_snprintf(
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len(),
                self.raw.as_ptr(),
                sys::NFTNL_OUTPUT_DEFAULT,
                0,
            )
        };
        let n = usize::try_from(n)
            .unwrap_or(0)
            .min(buf.len().saturating_sub(1));
        String::from_utf8_lossy(&buf[..n]).trim_end().to_owned()
    }
}
