//! The node controller: the seed ovsController's operations, natively.

pub mod types;
