//! The poison every output is filled with before a kernel runs (a leaf module).
use data_gen::DType;

/// The byte pattern every element of an output is filled with before a kernel runs: a NaN for
/// floats, a sentinel for integers.
pub fn poison_pattern(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F64 => 0x7FF4_BAD0_BAD0_BAD0u64.to_le_bytes().to_vec(),
        DType::F32 => 0x7FBA_DBADu32.to_le_bytes().to_vec(),
        DType::F16 => 0x7DBAu16.to_le_bytes().to_vec(),
        DType::BF16 => 0x7FBAu16.to_le_bytes().to_vec(),
        DType::I64 => 0x7A7A_7A7A_7A7A_7A7Au64.to_le_bytes().to_vec(),
        DType::I32 => 0x7A7A_7A7Au32.to_le_bytes().to_vec(),
        DType::U8 => vec![0xA5],
    }
}
