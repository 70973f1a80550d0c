//! The element types of the suite's tensors and their safetensors names (a leaf module).
use safetensors::Dtype;

/// Element types of the suite's tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 64-bit float.
    F64,
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit signed integer.
    I64,
    /// 32-bit signed integer.
    I32,
    /// Unsigned byte.
    U8,
}

impl DType {
    /// All dtypes.
    pub const ALL: [DType; 7] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::U8,
    ];

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 => 1,
        }
    }

    /// Lowercase name as PyTorch and the catalog spell it: `"f32"`, `"bf16"`, …
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::U8 => "u8",
        }
    }

    /// Parse a [`DType::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Whether the dtype is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// The safetensors dtype.
    pub fn to_safetensors(self) -> Dtype {
        match self {
            DType::F64 => Dtype::F64,
            DType::F32 => Dtype::F32,
            DType::F16 => Dtype::F16,
            DType::BF16 => Dtype::BF16,
            DType::I64 => Dtype::I64,
            DType::I32 => Dtype::I32,
            DType::U8 => Dtype::U8,
        }
    }

    /// The dtype for a safetensors dtype, if this crate handles it.
    pub fn from_safetensors(dtype: Dtype) -> Option<Self> {
        Some(match dtype {
            Dtype::F64 => DType::F64,
            Dtype::F32 => DType::F32,
            Dtype::F16 => DType::F16,
            Dtype::BF16 => DType::BF16,
            Dtype::I64 => DType::I64,
            Dtype::I32 => DType::I32,
            Dtype::U8 => DType::U8,
            _ => return None,
        })
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<DType> for Dtype {
    fn from(d: DType) -> Self {
        d.to_safetensors()
    }
}
