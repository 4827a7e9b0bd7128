//! corral-egress
