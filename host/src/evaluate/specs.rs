//! A problem's tensors by role: the inputs a kernel reads, the outputs (and in-out tensors) it
//! writes. A leaf: the input sets, the expected outputs and the checks all start from these.
use bench_problems::{Problem, Role, TensorSpec};

/// The problem's input tensors.
pub(super) fn input_specs(p: &dyn Problem) -> Vec<TensorSpec> {
    p.tensors()
        .into_iter()
        .filter(|t| t.role == Role::Input)
        .collect()
}

/// The problem's output and in-out tensors.
pub(super) fn output_specs(p: &dyn Problem) -> Vec<TensorSpec> {
    p.tensors()
        .into_iter()
        .filter(|t| t.role != Role::Input)
        .collect()
}
