//! Problem families: what problems of one kind share, so each problem module keeps to its
//! specifics. [`bags`]: CSR embedding bags (problems 1–5). [`sparse`]: the scan, sort and
//! keyed-jagged sub-plans of the sparse problems (6–9). [`interaction`]: feature interactions
//! (10–12). [`rows`]: a table's rows decoded from its bytes one looked-up row at a time.
pub mod bags;
pub mod interaction;
pub mod rows;
pub mod sparse;
