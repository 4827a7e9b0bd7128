//! corral-tests
