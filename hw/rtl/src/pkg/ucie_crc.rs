//! CRC-32 unit of the UCIe D2D adapter (RTL twin of the CRC in `hw::pkg::ucie`, which is
//! `crc::CRC_32_ISO_HDLC` via `hw::pkg::ucie::frame_crc`).
//!
//! CRC-32/ISO-HDLC: polynomial 0x04C11DB7, reflected in and out (so the register shifts right
//! and uses the reflected polynomial 0xEDB88320), initial value 0xFFFFFFFF, final XOR
//! 0xFFFFFFFF. The adapter's frame is 16 header bytes + 256 data bytes covered by the CRC
//! (272 bytes, `hw::pkg::ucie::CRC_COVERED_BYTES`), then the CRC field, little-endian.
//!
//! **Data path.** `D` bits per cycle, `D / 8` consecutive frame bytes with frame byte `k` of
//! the chunk in bits `[8k+7:8k]` (little-endian: the byte order on the wire, and since the CRC
//! is reflected, bit `i` of the chunk is the `i`-th bit the LFSR consumes). `D / 8` must divide
//! 272 so a frame is a whole number of chunks (no byte enables): 64 bits (34 cycles per frame,
//! the small variant) or 1088 bits (136 bytes, 2 cycles per frame). The default link
//! (64 lanes × 18 GT/s, 1.6 GHz adapter clock) puts a frame on the wire every 2.84 cycles, so
//! only the 1088-bit unit keeps up with the line rate on one instance; the 64-bit one needs
//! 12 frames in flight (12 units) or a faster clock.
//!
//! **Use.** TX: assert `start` with the first chunk of a frame and `valid` with every chunk;
//! after the last one `crc` holds the frame's CRC (registered). RX: the same, and present the
//! received CRC field on `expected`: `crc_ok` is the check the adapter's receiver makes (the
//! replay controller's `rx_crc_ok`). A `start` chunk restarts from the initial value, so frames
//! can follow back to back; `valid` low holds the state (gaps are allowed).
//!
//! Implementation note: the per-chunk update is linear over GF(2) in the register and the
//! chunk (a serial step is `l' = (l >> 1) ^ ((l[0] ^ d) · poly)`), so `D` unrolled steps are
//! `next = A·lfsr ⊕ B·data` with constant 32×32 and 32×D matrices. [`UcieCrc32Rtl::new`]
//! computes them by running the bit-serial LFSR on unit vectors; each next-state bit is then
//! the parity (`xor()`) of the masked register and chunk, which yosys maps to balanced XOR
//! trees (about 4 LUT levels for up to 96 inputs). It was the serial LFSR unrolled `D` times,
//! whose network yosys left 23 LUT levels deep (ECP5 62.5 MHz); the value is the same bit for
//! bit (the lockstep against `crc::CRC_32_ISO_HDLC` and the co-sim check it).

use rust_hdl::prelude::*;

/// CRC-32/ISO-HDLC over `D`-bit chunks (`D` a multiple of 8 and `D / 8` dividing 272).
///
/// Port coupling: `crc`: registered; `crc_ok`: comb(expected, state); `start`, `valid`,
/// `data`: sampled at the rising clock edge.
#[derive(LogicBlock)]
pub struct UcieCrc32Rtl<const D: usize> {
    /// Single clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous, active-high reset: the register returns to the initial value.
    pub reset: Signal<In, Bit>,
    /// This chunk is the first of a frame: the CRC restarts from the initial value.
    pub start: Signal<In, Bit>,
    /// `data` holds a chunk this cycle.
    pub valid: Signal<In, Bit>,
    /// `D / 8` frame bytes, the first in bits `[7:0]`.
    pub data: Signal<In, Bits<D>>,
    /// The received CRC field (RX check); ignored by the TX use.
    pub expected: Signal<In, Bits<32>>,
    /// CRC-32 of the bytes consumed since the last `start` (final XOR applied). registered.
    pub crc: Signal<Out, Bits<32>>,
    /// `crc == expected`. comb(expected, state).
    pub crc_ok: Signal<Out, Bit>,
    /// The LFSR register (before the final XOR).
    state: DFF<Bits<32>>,
    /// The LFSR before this cycle's chunk (the register, or the initial value on `start`).
    lfsr: Signal<Local, Bits<32>>,
    /// The LFSR after the chunk: bit k = parity(lfsr & ms[k]) ^ parity(data & md[k]).
    nxt: Signal<Local, Bits<32>>,
    /// Rows of the update matrices A (register) and B (chunk), and the unit vectors.
    ms: [Constant<Bits<32>>; 32],
    md: [Constant<Bits<D>>; 32],
    unit: [Constant<Bits<32>>; 32],
    /// 0xFFFFFFFF: initial value and final XOR.
    ones: Constant<Bits<32>>,
}

/// Bytes covered by the adapter's CRC (header + data), `hw::pkg::ucie::CRC_COVERED_BYTES`.
pub const UCIE_CRC_COVERED_BYTES: usize = 272;

impl<const D: usize> UcieCrc32Rtl<D> {
    /// Builds the unit. `chunk_bits` is the configured data-path width and must equal `D`;
    /// `D` must be a multiple of 8 whose bytes divide the 272-byte frame.
    pub fn new(chunk_bits: usize) -> Self {
        assert_eq!(chunk_bits, D, "configured chunk width {chunk_bits} != RTL width {D}");
        assert!(
            D % 8 == 0 && D > 0 && UCIE_CRC_COVERED_BYTES % (D / 8) == 0,
            "CRC chunk width {D} must be a multiple of 8 bits whose bytes divide {UCIE_CRC_COVERED_BYTES}"
        );
        // The bit-serial LFSR (reflected polynomial), as the matrices' reference.
        let serial = |mut l: u32, data: &[bool]| {
            for &d in data {
                l = if (l & 1 == 1) ^ d { (l >> 1) ^ 0xEDB8_8320 } else { l >> 1 };
            }
            l
        };
        let zero_data = vec![false; D];
        // Column m of A: the register's unit vector m through D steps of zero data; column i
        // of B: a zero register through the chunk with only bit i set.
        let a_col: Vec<u32> = (0..32).map(|m| serial(1u32 << m, &zero_data)).collect();
        let b_col: Vec<u32> = (0..D)
            .map(|i| {
                let mut d = zero_data.clone();
                d[i] = true;
                serial(0, &d)
            })
            .collect();
        let ms: [Constant<Bits<32>>; 32] = std::array::from_fn(|k| {
            let row = (0..32).fold(0u64, |r, m| r | ((((a_col[m] >> k) & 1) as u64) << m));
            Constant::new(row.into())
        });
        let md: [Constant<Bits<D>>; 32] = std::array::from_fn(|k| {
            let row = (0..D).fold(Bits::<D>::default(), |r, i| r.replace_bit(i, (b_col[i] >> k) & 1 == 1));
            Constant::new(row)
        });
        Self {
            clock: Default::default(),
            reset: Default::default(),
            start: Default::default(),
            valid: Default::default(),
            data: Default::default(),
            expected: Default::default(),
            crc: Default::default(),
            crc_ok: Default::default(),
            state: Default::default(),
            lfsr: Default::default(),
            nxt: Default::default(),
            ms,
            md,
            unit: std::array::from_fn(|k| Constant::new((1u64 << k).into())),
            ones: Constant::new(0xFFFF_FFFFu64.into()),
        }
    }

    /// Cycles one frame (272 bytes) takes through the unit.
    pub fn cycles_per_frame() -> usize {
        UCIE_CRC_COVERED_BYTES * 8 / D
    }
}

impl<const D: usize> Logic for UcieCrc32Rtl<D> {
    #[hdl_gen]
    fn update(&mut self) {
        // 1. Clock the register; hold by default (gaps between chunks).
        dff_setup!(self, clock, state);
        // 2. Outputs from the register (crc_ok also from the received field).
        self.crc.next = self.state.q.val() ^ self.ones.val();
        self.crc_ok.next = (self.state.q.val() ^ self.ones.val()) == self.expected.val();
        // 3. The LFSR over this chunk, bit 0 first (reflected CRC): the D serial steps (shift
        //    right, XOR the polynomial when the bit leaving the register differs from the data
        //    bit) as one linear map, a parity per next-state bit.
        self.lfsr.next = self.state.q.val();
        if self.start.val() {
            self.lfsr.next = self.ones.val();
        }
        self.nxt.next = 0.into();
        for k in 0..32 {
            if (self.lfsr.val() & self.ms[k].val()).xor() ^ (self.data.val() & self.md[k].val()).xor() {
                self.nxt.next = self.nxt.val() | self.unit[k].val();
            }
        }
        // 4. Next state.
        if self.valid.val() {
            self.state.d.next = self.nxt.val();
        }
        if self.reset.val() {
            self.state.d.next = self.ones.val();
        }
    }
}

/// Declares a named alias for a standard CRC data-path width (S3).
#[macro_export]
macro_rules! declare_ucie_crc32 {
    ($name: ident, $d: expr) => {
        #[doc = concat!("UCIe CRC-32 unit, ", stringify!($d), " bits per cycle.")]
        pub type $name = $crate::pkg::ucie_crc::UcieCrc32Rtl<$d>;
    };
}

// Small variant: 8 bytes per cycle, 34 cycles per frame.
declare_ucie_crc32!(UcieCrc32x64Rtl, 64);

/// Co-sim recorder: `cycles` cycles of random frames on the 64-bit unit — a `start` every
/// 34 valid chunks (one 272-byte frame) with random gaps, random data, and an `expected`
/// value that is the frame's true CRC half of the time (so `crc_ok` toggles).
pub fn record_ucie_crc32_64(module: &str, cycles: usize, seed: u64) -> Result<crate::cosim::PortTrace, crate::RtlError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let chunks = UCIE_CRC_COVERED_BYTES / 8;
    let (mut k, mut frame) = (0usize, Vec::with_capacity(UCIE_CRC_COVERED_BYTES));
    let mut expected = 0u32;
    let stim: Vec<(bool, bool, bool, u64, u32)> = (0..cycles)
        .map(|c| {
            let valid = rng.gen_bool(0.8);
            let data: u64 = rng.gen();
            let start = valid && k == 0;
            if valid {
                frame.extend_from_slice(&data.to_le_bytes());
                k += 1;
                if k == chunks {
                    let crc = hw::pkg::ucie::frame_crc(&frame);
                    expected = if rng.gen_bool(0.5) { crc } else { crc ^ 1 };
                    frame.clear();
                    k = 0;
                }
            }
            (c == 0, start, valid, data, expected)
        })
        .collect();
    crate::cosim::record(
        module,
        UcieCrc32x64Rtl::new(64),
        cycles,
        |u| &mut u.clock,
        |c, u| {
            let (reset, start, valid, data, exp) = stim[c];
            u.reset.next = reset;
            u.start.next = start;
            u.valid.next = valid;
            u.data.next = data.into();
            u.expected.next = (exp as u64).into();
        },
    )
}

/// Export registration: the 64-bit data path (the 1088-bit line-rate unit is checked by the
/// lockstep test; its XOR tree is a synthesis-time stress, not an FPGA target).
pub const EXPORT: crate::export::BlockDef = crate::export::BlockDef {
    name: "ucie_crc32",
    top: false,
    domain: crate::export::ModelDomain::PkgUcie,
    cosim_cycles: 4096,
    sets: &[crate::export::ParamSet {
        module: "ucie_crc32_64",
        rust_type: "UcieCrc32x64Rtl",
        params: &[("data_bits", 64)],
        ecp5_clock_mhz: 100,
        build: || crate::export::boxed(UcieCrc32x64Rtl::new(64)),
        recorder: Some(|cycles, seed| record_ucie_crc32_64("ucie_crc32_64", cycles, seed)),
    }],
};
// Line-rate variant for the default link: half a frame per cycle (2 cycles per frame; the wire
// delivers one every 2.84 cycles of the 1.6 GHz adapter clock).
declare_ucie_crc32!(UcieCrc32x1088Rtl, 1088);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        not(feature = "yosys"),
        ignore = "needs yosys (enable feature `yosys`)"
    )]
    fn ucie_crc32_synthesizable() {
        let mut uut = UcieCrc32x64Rtl::new(64);
        uut.connect_all();
        // The export runs rust-hdl's structural checks too.
        check_all(&uut).unwrap();
        yosys_validate("waferstream_ucie_crc32_64", &generate_verilog(&uut)).unwrap();
        let mut uut = UcieCrc32x1088Rtl::new(1088);
        uut.connect_all();
        check_all(&uut).unwrap();
        yosys_validate("waferstream_ucie_crc32_1088", &generate_verilog(&uut)).unwrap();
    }

    #[test]
    #[should_panic(expected = "!= RTL width")]
    fn ucie_crc32_new_checks_width() {
        let _ = UcieCrc32x64Rtl::new(32);
    }

    #[test]
    #[should_panic(expected = "must be a multiple of 8")]
    fn ucie_crc32_rejects_partial_chunks() {
        let _ = UcieCrc32Rtl::<96>::new(96);
    }
}
