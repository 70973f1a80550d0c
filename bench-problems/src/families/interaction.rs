//! What the feature-interaction problems 10–12 share (dense and sparse features, pair order of
//! the lower triangle, the eager kernels' launch shapes).
