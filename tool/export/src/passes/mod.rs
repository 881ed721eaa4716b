//! Graph passes. Each takes `&mut Graph`, keeps the numbers the graph computes, and knows
//! nothing about which model it transforms.

pub mod to_out;

use crate::error::Result;
use crate::graph::Graph;

/// The default pipeline, in order.
pub fn optimize(g: &mut Graph) -> Result<()> {
    to_out::to_out_variants(g)
}
