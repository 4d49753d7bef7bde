//! `UcieCrc32Rtl` against the CRC the CL adapter uses (`hw::pkg::ucie::frame_crc`, i.e.
//! `crc::CRC_32_ISO_HDLC`): random 272-byte frames (header + data, the bytes the adapter's
//! CRC covers), fed in `D`-bit chunks back to back, with gaps and with corrupted CRC fields.

mod common;

use hw::pkg::ucie::{frame_crc, CRC_COVERED_BYTES};
use proptest::prelude::*;
use rtl::prelude::*;
use rust_hdl::prelude::*;

/// `bytes` (at most `D / 8` of them) as a `D`-bit chunk, the first byte in bits [7:0].
fn chunk<const D: usize>(bytes: &[u8]) -> Bits<D> {
    let mut b = Bits::<D>::default();
    for (k, w) in bytes.chunks(8).enumerate() {
        let mut x = [0u8; 8];
        x[..w.len()].copy_from_slice(w);
        b = b | (Bits::<D>::from(u64::from_le_bytes(x)) << (64 * k as u64));
    }
    b
}

fn clock<const D: usize>(uut: &mut UcieCrc32Rtl<D>) {
    uut.clock.next = true.into();
    common::settle(uut);
    uut.clock.next = false.into();
    common::settle(uut);
}

/// Feeds each frame (with `gap[i]` idle cycles before it), checks `crc` after its last chunk
/// against the CL's CRC, and `crc_ok` against the right and a wrong received CRC field.
fn check_frames<const D: usize>(frames: &[Vec<u8>], gaps: &[u8]) -> Result<(), TestCaseError> {
    assert_eq!(CRC_COVERED_BYTES, 272);
    let mut uut = UcieCrc32Rtl::<D>::new(D);
    uut.connect_all();
    uut.reset.next = true;
    common::settle(&mut uut);
    clock(&mut uut);
    uut.reset.next = false;
    let per = D / 8;
    for (i, f) in frames.iter().enumerate() {
        prop_assert_eq!(f.len(), CRC_COVERED_BYTES);
        for _ in 0..gaps.get(i).copied().unwrap_or(0) {
            uut.valid.next = false;
            uut.start.next = false;
            uut.data.next = chunk::<D>(&[0xa5; 8]);
            common::settle(&mut uut);
            clock(&mut uut);
        }
        for (k, c) in f.chunks(per).enumerate() {
            uut.valid.next = true;
            uut.start.next = k == 0;
            uut.data.next = chunk::<D>(c);
            common::settle(&mut uut);
            clock(&mut uut);
        }
        uut.valid.next = false;
        uut.start.next = false;
        let want = frame_crc(f);
        uut.expected.next = (want as u64).into();
        common::settle(&mut uut);
        prop_assert_eq!(uut.crc.val().to_u64(), want as u64, "D={} frame {}: RTL crc {:#x} != CL {:#x}", D, i, uut.crc.val().to_u64(), want);
        prop_assert!(uut.crc_ok.val(), "D={} frame {}: crc_ok low on the right CRC", D, i);
        uut.expected.next = ((want ^ (1 << (i % 32))) as u64).into();
        common::settle(&mut uut);
        prop_assert!(!uut.crc_ok.val(), "D={} frame {}: crc_ok high on a wrong CRC", D, i);
    }
    Ok(())
}

fn frames_strategy() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<u8>)> {
    (
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), CRC_COVERED_BYTES), 1..6),
        proptest::collection::vec(0u8..3, 6),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn ucie_crc32_x64_matches_cl((frames, gaps) in frames_strategy()) {
        check_frames::<64>(&frames, &gaps)?;
    }

    #[test]
    fn ucie_crc32_x1088_matches_cl((frames, gaps) in frames_strategy()) {
        check_frames::<1088>(&frames, &gaps)?;
    }

    /// 136 bits = 17 bytes, a width whose chunks straddle 64-bit words.
    #[test]
    fn ucie_crc32_x136_matches_cl((frames, gaps) in frames_strategy()) {
        check_frames::<136>(&frames, &gaps)?;
    }
}

/// Corner frames: all zeros, all ones, one set bit.
#[test]
fn ucie_crc32_corner_frames() {
    let mut one_bit = vec![0u8; CRC_COVERED_BYTES];
    one_bit[271] = 0x80;
    let frames = vec![vec![0u8; CRC_COVERED_BYTES], vec![0xffu8; CRC_COVERED_BYTES], one_bit];
    check_frames::<64>(&frames, &[0, 1, 0]).unwrap();
    check_frames::<1088>(&frames, &[1, 0, 2]).unwrap();
}

// The Verilog of these blocks is linted, co-simulated and synthesized by
// scripts/verilog-check.sh once they join the export registry (issue 8, open).
