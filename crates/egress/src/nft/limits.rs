//! The length contracts of the buffers libnftnl copies into: a set
//! element's key or data and an expression's data are copied into
//! fixed-size registers, so every length is checked before the bytes are
//! handed over (`obj` calls these), and a bad one is a typed error.

use super::NftError;

/// The most bytes libnftnl copies into a key, a set element's data or an
/// expression's data (`NFT_DATA_VALUE_MAXLEN`, the size of its buffer).
pub(crate) const DATA_MAX: usize = 64;

/// `len` fits libnftnl's data buffer (and is not empty).
pub(crate) fn check_data_len(what: impl FnOnce() -> String, len: usize) -> Result<(), NftError> {
    if len == 0 || len > DATA_MAX {
        return Err(NftError::DataLength {
            what: what(),
            len,
            expected: format!("1 to {DATA_MAX}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::obj::{Expr, Set, cstr};
    use nftnl_sys as sys;

    fn set_named(name: &str, key_len: Option<u32>) -> Set {
        let mut s = Set::new().unwrap();
        s.set_str(sys::NFTNL_SET_NAME, &cstr(name).unwrap());
        if let Some(n) = key_len {
            s.set_u32(sys::NFTNL_SET_KEY_LEN, n);
        }
        s
    }

    #[test]
    fn an_element_key_must_have_the_sets_key_length() {
        let mut s = set_named("allow4", Some(4));
        s.add_elem(&[10, 0, 0, 1], None).unwrap();
        for bad in [vec![10, 0, 0], vec![0; 16], vec![]] {
            let e = s.add_elem(&bad, None).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, NftError::DataLength { len, .. } if len == bad.len()));
            assert!(msg.contains("set allow4"), "{msg}");
        }
        assert_eq!(s.elems().unwrap().len(), 1, "refused keys were not added");
    }

    #[test]
    fn an_element_key_never_exceeds_libnftnls_buffer() {
        // Without a declared length only libnftnl's buffer bounds the key.
        let mut s = set_named("free", None);
        s.add_elem(&[7; DATA_MAX], None).unwrap();
        let e = s.add_elem(&[7; DATA_MAX + 1], None).unwrap_err();
        assert!(e.to_string().contains("1 to 64"), "{e}");
        assert_eq!(s.elems().unwrap().len(), 1);
    }

    #[test]
    fn expression_data_is_bounded_by_a_register() {
        let ok = Expr::new(c"cmp")
            .unwrap()
            .data(sys::NFTNL_EXPR_CMP_DATA, &[1; 16]);
        assert!(ok.is_ok());
        for bad in [vec![], vec![1; DATA_MAX + 1]] {
            let e = Expr::new(c"cmp")
                .unwrap()
                .data(sys::NFTNL_EXPR_CMP_DATA, &bad)
                .err()
                .expect("refused");
            assert!(matches!(e, NftError::DataLength { .. }), "{e}");
        }
    }
}
