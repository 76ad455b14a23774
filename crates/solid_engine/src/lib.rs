//! SolidEngine (work in progress).
