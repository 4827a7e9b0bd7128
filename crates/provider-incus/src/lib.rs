//! corral-provider-incus
