//! The node controller: the seed ovsController's operations, natively.

mod stub;
pub mod types;
pub use stub::*;
