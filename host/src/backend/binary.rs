//! `.cubin` and `.fatbin` files built offline (nvcc): what their first bytes must be, so that
//! `check` can tell a real image from a misnamed file without a GPU. The driver loads either
//! with `cuModuleLoadData`; the parameter list of a kernel comes from the driver
//! (`cuFuncGetParamInfo`, CUDA 12.4+), or from PTX text embedded uncompressed in a fatbin.

/// What an image is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An ELF for a CUDA GPU (`e_machine` = EM_CUDA).
    Cubin,
    /// A fat binary (header magic 0xBA55ED50).
    Fatbin,
}

/// `e_machine` of a CUDA ELF.
const EM_CUDA: u16 = 190;
/// The first word of a fat binary's header (little endian).
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// What `image` is, or why it is neither a cubin nor a fatbin.
pub(crate) fn check_image(image: &[u8]) -> Result<Kind, String> {
    if image.len() >= 4 && u32::from_le_bytes(image[..4].try_into().unwrap()) == FATBIN_MAGIC {
        return Ok(Kind::Fatbin);
    }
    if !image.starts_with(b"\x7fELF") {
        let head: Vec<String> = image.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(format!(
            "neither a cubin (an ELF, starting 7f 45 4c 46) nor a fatbin (starting 50 ed 55 ba): it starts {}",
            if head.is_empty() { "empty".to_string() } else { head.join(" ") }
        ));
    }
    if image.len() < 20 {
        return Err(format!(
            "an ELF of {} bytes: too short for a cubin",
            image.len()
        ));
    }
    if image[4] != 2 {
        return Err("a 32-bit ELF: a cubin is a 64-bit ELF".into());
    }
    // e_machine, in the byte order of e_ident[EI_DATA] (1: little endian).
    let machine = match image[5] {
        1 => u16::from_le_bytes([image[18], image[19]]),
        _ => u16::from_be_bytes([image[18], image[19]]),
    };
    if machine != EM_CUDA {
        return Err(format!(
            "an ELF for machine {machine}, not a CUDA GPU ({EM_CUDA}): a host object or library, not a cubin"
        ));
    }
    Ok(Kind::Cubin)
}

/// PTX text embedded in an image (a fatbin built with `-gencode ...,code=compute_XX` and no
/// compression holds it as plain text), for the parameter lists of its kernels; `None` when
/// there is none.
pub(crate) fn embedded_ptx(image: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(image);
    text.contains(".entry").then(|| text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(machine: u16) -> Vec<u8> {
        let mut b = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0x33];
        b.resize(18, 0);
        b.extend_from_slice(&machine.to_le_bytes());
        b.resize(64, 0);
        b
    }

    #[test]
    fn magic_bytes_tell_cubins_and_fatbins_from_other_files() {
        assert_eq!(check_image(&elf(190)), Ok(Kind::Cubin));
        let mut fat = 0xBA55_ED50u32.to_le_bytes().to_vec();
        fat.extend_from_slice(&[1, 0, 16, 0]);
        assert_eq!(check_image(&fat), Ok(Kind::Fatbin));
        let host = check_image(&elf(62)).unwrap_err();
        assert!(
            host.contains("machine 62") && host.contains("not a cubin"),
            "{host}"
        );
        let text = check_image(b"// a .cu file renamed\n").unwrap_err();
        assert!(
            text.contains("neither a cubin") && text.contains("2f 2f"),
            "{text}"
        );
        assert!(check_image(b"").unwrap_err().contains("empty"));
        assert!(check_image(b"\x7fELF\x02")
            .unwrap_err()
            .contains("too short"));
        let mut elf32 = elf(190);
        elf32[4] = 1;
        assert!(check_image(&elf32).unwrap_err().contains("32-bit"));
    }

    #[test]
    fn ptx_inside_an_image_is_found() {
        let mut image = 0xBA55_ED50u32.to_le_bytes().to_vec();
        image.extend_from_slice(
            b"\0\0.version 8.0\n.visible .entry k(\n.param .u64 k_param_0\n)\n{ ret; }\0",
        );
        let ptx = embedded_ptx(&image).unwrap();
        assert_eq!(
            super::super::ptx_params::entry_params(&ptx, "k"),
            Some(vec![8])
        );
        assert!(embedded_ptx(&elf(190)).is_none());
    }
}
