//! corral-provider-multipass
