//! Change points: placeholder, written by the next commit.
