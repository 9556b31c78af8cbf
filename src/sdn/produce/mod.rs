//! The flow producers whose flows follow the store's selector groups incrementally: the
//! NetworkPolicy mode's (`netpol/`). The seed's entities' flows are functions of one entity
//! each (`core/desired.rs`).

pub mod netpol;
