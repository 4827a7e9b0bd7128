//! corral-examples
