//! Supervised child processes (work in progress).
