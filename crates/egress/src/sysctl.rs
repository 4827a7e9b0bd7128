//! sysctl
