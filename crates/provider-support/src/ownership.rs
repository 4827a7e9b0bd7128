//! Ownership checks in the provider vocabulary: every command that names
//! an instance checks its stamp first, a name whose stamp exists is taken,
//! and a failed create leaves no stamp behind unless the instance may exist.

use std::future::Future;

use corral_sandbox_core::sandbox::ProviderError;

use crate::errors::staging_error;
use crate::staging::{OwnershipStamp, Staging};

/// True for a usable instance-name prefix: 2 to 20 of `[a-z0-9-]`,
/// starting with a letter and ending with `-`.
pub fn valid_name_prefix(prefix: &str) -> bool {
    (2..=20).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix.ends_with('-')
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

impl<S: OwnershipStamp> Staging<S> {
    /// The stamp of `vm`. Without one, `probe` (which asks the backend
    /// about `vm`) runs first, so an instance that is not there at all is
    /// reported by the probe's own error (NotFound); one that is there but
    /// unstamped is refused as not corral's. Whether the stamp matches is
    /// the caller's check: only the provider knows what its stamps record.
    pub async fn stamp_or_refuse<T, F>(&self, vm: &str, probe: F) -> Result<S, ProviderError>
    where
        F: Future<Output = Result<T, ProviderError>>,
    {
        if let Some(stamp) = self.read_stamp(vm).map_err(staging_error)? {
            return Ok(stamp);
        }
        probe.await?;
        Err(ProviderError::NotOwned {
            name: vm.to_owned(),
            reason: format!("no ownership stamp in `{}`", self.dir(vm).display()),
        })
    }

    /// Make `stamp.vm()`'s private directory and record that corral owns
    /// it. Providers do this before the backend creates anything, so an
    /// instance a failed create leaves behind is still corral's to delete.
    pub fn claim(&self, stamp: &S) -> Result<(), ProviderError> {
        self.create_dir(stamp.vm()).map_err(staging_error)?;
        self.write_stamp(stamp).map_err(staging_error)
    }

    /// Refuse when `vm` already carries a stamp (sandbox `name` exists).
    pub fn ensure_unclaimed(&self, vm: &str, name: &str) -> Result<(), ProviderError> {
        if self.read_stamp(vm).map_err(staging_error)?.is_some() {
            return Err(ProviderError::AlreadyExists {
                what: "sandbox",
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Pass `result` through; when it is a failure other than a timeout,
    /// drop `vm`'s staging directory first. After a timeout the instance may
    /// exist, so its stamp stays and corral can still delete it.
    pub fn discard_unless_timeout<T>(
        &self,
        vm: &str,
        result: Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        if let Err(e) = &result
            && !matches!(e, ProviderError::Timeout { .. })
        {
            self.remove(vm).map_err(staging_error)?;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct TestStamp {
        vm: String,
    }

    impl OwnershipStamp for TestStamp {
        fn vm(&self) -> &str {
            &self.vm
        }
    }

    fn staging(tmp: &tempfile::TempDir) -> Staging<TestStamp> {
        let staging = Staging::open(tmp.path().join("s")).unwrap();
        staging.create_dir("corral-a").unwrap();
        staging
            .write_stamp(&TestStamp {
                vm: "corral-a".to_owned(),
            })
            .unwrap();
        staging
    }

    #[test]
    fn prefixes() {
        assert!(valid_name_prefix("corral-"));
        assert!(valid_name_prefix("c2-"));
        for bad in [
            "",
            "corral",
            "-x-",
            "Corral-",
            "a b-",
            "1x-",
            "a-very-long-prefix-xy-",
        ] {
            assert!(!valid_name_prefix(bad), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn a_valid_prefix_keeps_names_in_lowercase_dns_shape(p in "[a-z0-9-]{0,24}") {
            if valid_name_prefix(&p) {
                prop_assert!(p.len() <= 20);
                prop_assert!(p.as_bytes()[0].is_ascii_lowercase());
                prop_assert!(p.ends_with('-'));
            }
        }
    }

    #[tokio::test]
    async fn a_stamped_instance_is_returned_without_probing() {
        let tmp = tempfile::tempdir().unwrap();
        let s = staging(&tmp);
        let probe = async { panic!("the probe must not run for a stamped instance") };
        let stamp = s.stamp_or_refuse::<(), _>("corral-a", probe).await.unwrap();
        assert_eq!(stamp.vm, "corral-a");
    }

    #[tokio::test]
    async fn an_unstamped_instance_is_refused_or_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let s = staging(&tmp);
        let err = s
            .stamp_or_refuse("corral-b", async { Ok(()) })
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProviderError::NotOwned { reason, .. } if reason.contains("no ownership stamp")),
            "{err}"
        );
        let err = s
            .stamp_or_refuse::<(), _>("corral-b", async {
                Err(ProviderError::NotFound {
                    what: "sandbox",
                    name: "corral-b".to_owned(),
                })
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::NotFound { .. }), "{err}");
    }

    #[test]
    fn a_claim_makes_a_private_directory_with_the_stamp() {
        let tmp = tempfile::tempdir().unwrap();
        let s = staging(&tmp);
        let stamp = TestStamp {
            vm: "corral-n".to_owned(),
        };
        s.claim(&stamp).unwrap();
        assert_eq!(s.read_stamp("corral-n").unwrap(), Some(stamp));
        assert_eq!(crate::testing::mode(&s.dir("corral-n")), 0o700);
        assert!(s.ensure_unclaimed("corral-n", "n").is_err());
    }

    #[test]
    fn a_stamped_name_is_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let s = staging(&tmp);
        let err = s.ensure_unclaimed("corral-a", "a").unwrap_err();
        assert!(
            matches!(&err, ProviderError::AlreadyExists { name, .. } if name == "a"),
            "{err}"
        );
        s.ensure_unclaimed("corral-b", "b").unwrap();
    }

    #[test]
    fn failures_drop_the_stamp_but_timeouts_keep_it() {
        let tmp = tempfile::tempdir().unwrap();
        let s = staging(&tmp);
        let timeout: Result<(), _> = Err(ProviderError::Timeout {
            operation: "clone".to_owned(),
            after: Duration::from_secs(1),
        });
        assert!(s.discard_unless_timeout("corral-a", timeout).is_err());
        assert!(s.dir("corral-a").exists());
        assert_eq!(s.discard_unless_timeout("corral-a", Ok(5)).unwrap(), 5);
        assert!(s.dir("corral-a").exists());
        let failed: Result<(), _> = Err(ProviderError::NotFound {
            what: "sandbox",
            name: "x".to_owned(),
        });
        assert!(matches!(
            s.discard_unless_timeout("corral-a", failed),
            Err(ProviderError::NotFound { .. })
        ));
        assert!(!s.dir("corral-a").exists());
    }
}
