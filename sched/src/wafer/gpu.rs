//! **Analytical** GPU-cluster baselines for the wafer comparison (paper §I, §VI-A, §VI-D:
//! DGX B200 nodes and the NVL72 supernode). These are closed-form alpha-beta models, not
//! simulations: no congestion, no protocol overhead, no compute/communication overlap. Every
//! number they produce is labelled analytical in reports (docs/wafer-mapping.md, "GPU model").
//!
//! Units: bandwidths in GB/s (10^9 bytes/s) **per GPU per direction**, latencies (alpha) in µs
//! per message step, sizes in bytes, results in µs.

use serde::{Deserialize, Serialize};

/// An **analytical** GPU system: `nodes` nodes of `gpus_per_node` GPUs, NVLink inside a node
/// (full-bandwidth switch), InfiniBand between nodes (one NIC per GPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSystem {
    pub name: String,
    pub gpus_per_node: u32,
    pub nodes: u32,
    /// NVLink bandwidth per GPU, one direction, GB/s.
    pub nvlink_gbps: f64,
    /// Per-step latency of an NVLink transfer, µs (analytical alpha).
    pub nvlink_alpha_us: f64,
    /// Scale-out (InfiniBand) bandwidth per GPU, one direction, GB/s.
    pub ib_gbps: f64,
    /// Per-step latency of an InfiniBand transfer, µs (analytical alpha).
    pub ib_alpha_us: f64,
}

/// Assumed NVLink per-step latency, µs: order of the small-message per-hop latency of NCCL
/// rings inside a node (not a datasheet number; a model constant, configurable).
pub const NVLINK_ALPHA_US: f64 = 2.0;
/// Assumed InfiniBand per-step latency, µs (NIC + switch + GPUDirect RDMA setup; not a
/// datasheet number; a model constant, configurable).
pub const IB_ALPHA_US: f64 = 5.0;

/// GB/s → bytes per µs.
#[inline]
fn bytes_per_us(gbps: f64) -> f64 {
    gbps * 1e3
}

impl GpuSystem {
    /// **Analytical** DGX B200 cluster of `nodes` nodes. NVIDIA DGX B200 datasheet
    /// (nvidia.com/en-us/data-center/dgx-b200, the paper's ref. \[10\]): 8 B200 GPUs, 5th-gen
    /// NVLink 1.8 TB/s per GPU bidirectional = 900 GB/s per direction (14.4 TB/s aggregate);
    /// compute fabric 8 × ConnectX-7 400 Gb/s, one per GPU = 50 GB/s per direction.
    /// Alphas: [`NVLINK_ALPHA_US`], [`IB_ALPHA_US`] (assumed).
    pub fn dgx_b200(nodes: u32) -> Self {
        GpuSystem {
            name: format!("dgx-b200x{nodes}"),
            gpus_per_node: 8,
            nodes,
            nvlink_gbps: 900.0,
            nvlink_alpha_us: NVLINK_ALPHA_US,
            ib_gbps: 50.0,
            ib_alpha_us: IB_ALPHA_US,
        }
    }

    /// **Analytical** GB200 NVL72 supernode (nvidia.com/en-us/data-center/gb200-nvl72, the
    /// paper's ref. \[11\]): 72 Blackwell GPUs in one NVLink domain (NVLink switch trays),
    /// 1.8 TB/s per GPU bidirectional = 900 GB/s per direction (130 TB/s aggregate). Modelled
    /// as one "node" of 72; the IB fields are kept (DGX values) but unused within it.
    pub fn nvl72() -> Self {
        GpuSystem {
            name: "nvl72".into(),
            gpus_per_node: 72,
            nodes: 1,
            nvlink_gbps: 900.0,
            nvlink_alpha_us: NVLINK_ALPHA_US,
            ib_gbps: 50.0,
            ib_alpha_us: IB_ALPHA_US,
        }
    }

    pub fn gpus(&self) -> u32 {
        self.gpus_per_node * self.nodes
    }

    /// Every count ≥ 1, every bandwidth > 0, every alpha ≥ 0; the error names the field.
    pub fn validate(&self) -> crate::Result<()> {
        if self.gpus_per_node == 0 {
            return Err(crate::Error::field("gpu.gpus_per_node", "must be at least 1"));
        }
        if self.nodes == 0 {
            return Err(crate::Error::field("gpu.nodes", "must be at least 1"));
        }
        for (f, v) in [("gpu.nvlink_gbps", self.nvlink_gbps), ("gpu.ib_gbps", self.ib_gbps)] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(crate::Error::value(f, v, "must be a positive number"));
            }
        }
        for (f, v) in [("gpu.nvlink_alpha_us", self.nvlink_alpha_us), ("gpu.ib_alpha_us", self.ib_alpha_us)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(crate::Error::value(f, v, "must be a non-negative number"));
            }
        }
        Ok(())
    }

    /// **Analytical** all-reduce of `bytes` per GPU among `group` GPUs, µs.
    ///
    /// * `group ≤ gpus_per_node` (one NVLink domain): ring, `2(n−1)·(α_nv + B/(n·bw_nv))`.
    /// * otherwise hierarchical over `m = ⌈group / g⌉` nodes of `g = gpus_per_node`: NVLink
    ///   reduce-scatter, then `g` concurrent IB ring all-reduces of `B/g` among the `m` nodes
    ///   (one per NIC), then NVLink all-gather:
    ///   `2(g−1)·(α_nv + B/(g·bw_nv)) + 2(m−1)·(α_ib + B/(g·m·bw_ib))`.
    pub fn allreduce_us(&self, bytes: f64, group: u32) -> f64 {
        let n = group;
        if n <= 1 {
            return 0.0;
        }
        let (nv, ib) = (bytes_per_us(self.nvlink_gbps), bytes_per_us(self.ib_gbps));
        if n <= self.gpus_per_node {
            let nf = n as f64;
            return 2.0 * (nf - 1.0) * (self.nvlink_alpha_us + bytes / (nf * nv));
        }
        let g = self.gpus_per_node as f64;
        let m = n.div_ceil(self.gpus_per_node) as f64;
        let intra = if self.gpus_per_node > 1 { 2.0 * (g - 1.0) * (self.nvlink_alpha_us + bytes / (g * nv)) } else { 0.0 };
        intra + 2.0 * (m - 1.0) * (self.ib_alpha_us + bytes / (g * m * ib))
    }

    /// **Analytical** uniform all-to-all among `ep` GPUs (filling nodes in order), each GPU
    /// sending `bytes_per_pair` to every other GPU, µs. NVLink and IB run concurrently; each
    /// GPU's own link is the bottleneck (full-bisection switches):
    /// `max(α_nv + (g_in−1)·b/bw_nv, α_ib + (ep−g_in)·b/bw_ib)`, `g_in = min(ep, gpus_per_node)`
    /// (a term is 0 when it has nothing to send).
    pub fn all_to_all_us(&self, bytes_per_pair: f64, ep: u32) -> f64 {
        if ep <= 1 {
            return 0.0;
        }
        let g_in = ep.min(self.gpus_per_node);
        let remote = ep - g_in;
        let t_nv = if g_in > 1 {
            self.nvlink_alpha_us + (g_in - 1) as f64 * bytes_per_pair / bytes_per_us(self.nvlink_gbps)
        } else {
            0.0
        };
        let t_ib = if remote > 0 {
            self.ib_alpha_us + remote as f64 * bytes_per_pair / bytes_per_us(self.ib_gbps)
        } else {
            0.0
        };
        t_nv.max(t_ib)
    }

    /// Bytes one GPU sends to each other GPU in a MoE dispatch (**analytical**, balanced experts):
    /// `tokens_per_gpu` tokens, each to `top_k` experts spread evenly over `ep` GPUs, `hidden`
    /// elements of `bytes_per_elem` each: `T·k·H·bpe / ep`. For TP groups of `tp` GPUs holding
    /// T tokens each (after the all-gather), pass `T / tp`: each GPU of the group dispatches an
    /// equal share.
    pub fn moe_bytes_per_pair(tokens_per_gpu: f64, hidden: u32, top_k: u32, bytes_per_elem: u32, ep: u32) -> f64 {
        if ep == 0 {
            return 0.0;
        }
        tokens_per_gpu * top_k as f64 * hidden as f64 * bytes_per_elem as f64 / ep as f64
    }

    /// **Analytical** dispatch + combine of one MoE layer, µs (combine = dispatch volume in the
    /// other direction): `2 · all_to_all_us(moe_bytes_per_pair(..), ep)`.
    pub fn moe_a2a_us(&self, tokens_per_gpu: f64, hidden: u32, top_k: u32, bytes_per_elem: u32, ep: u32) -> f64 {
        2.0 * self.all_to_all_us(Self::moe_bytes_per_pair(tokens_per_gpu, hidden, top_k, bytes_per_elem, ep), ep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn ring_allreduce_in_node() {
        let s = GpuSystem::dgx_b200(4);
        // 8 GPUs, 9 MB: 14 steps of (2 µs + 9e6/8 B / 900e3 B/µs = 1.25 µs)
        assert!(close(s.allreduce_us(9e6, 8), 14.0 * (2.0 + 1.25)));
        assert_eq!(s.allreduce_us(9e6, 1), 0.0);
    }

    #[test]
    fn hierarchical_allreduce() {
        let s = GpuSystem::dgx_b200(4);
        // 32 GPUs = 4 nodes of 8, B = 8 MB: NVLink 14·(2 + 1e6/900e3) + IB 6·(5 + 8e6/(32·50e3))
        let want = 14.0 * (2.0 + 1e6 / 900e3) + 6.0 * (5.0 + 8e6 / 32.0 / 50e3);
        assert!(close(s.allreduce_us(8e6, 32), want));
        // NVL72: one domain, ring over 72
        let n = GpuSystem::nvl72();
        assert!(close(n.allreduce_us(72e6, 72), 142.0 * (2.0 + 1e6 / 900e3)));
    }

    #[test]
    fn all_to_all_closed_forms() {
        let s = GpuSystem::dgx_b200(4);
        // in one node: 7 peers over NVLink
        assert!(close(s.all_to_all_us(9e5, 8), 2.0 + 7.0 * 1.0));
        // 32 GPUs: 7 NVLink peers vs 24 IB peers; IB dominates
        assert!(close(s.all_to_all_us(5e4, 32), (5.0 + 24.0 * 1.0f64).max(2.0 + 7.0 * 5e4 / 9e5)));
        // MoE volume: 256 tokens, top-8, H = 7168, fp16, EP 32
        let b = GpuSystem::moe_bytes_per_pair(256.0, 7168, 8, 2, 32);
        assert!(close(b, 256.0 * 8.0 * 7168.0 * 2.0 / 32.0));
        assert!(close(s.moe_a2a_us(256.0, 7168, 8, 2, 32), 2.0 * s.all_to_all_us(b, 32)));
        assert!(GpuSystem::nvl72().moe_a2a_us(256.0, 7168, 8, 2, 72) < s.moe_a2a_us(256.0, 7168, 8, 2, 32));
        assert!(s.validate().is_ok());
        let mut bad = s.clone();
        bad.ib_gbps = 0.0;
        assert!(bad.validate().unwrap_err().to_string().contains("gpu.ib_gbps"));
    }
}
