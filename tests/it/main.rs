//! End-to-end tests of the sessionwatch binary.
