//! corral-provider-tart
