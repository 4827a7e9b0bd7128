//! netns
