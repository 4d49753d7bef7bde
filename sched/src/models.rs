//! MoE model presets (SPEC §3 and §4, plus OLMoE-1B-7B for the real trace).
//!
//! `d_ffn` is the per-expert FFN width (the MoE intermediate size), `layers` the number of
//! MoE layers (dense-FFN layers of the model are not counted). Expert bytes at int8 are
//! `3·d_model·d_ffn` (SwiGLU: W_gate, W_up, W_down). Sources: the papers' Table I for
//! hidden size / experts / top-k / MB per expert, the models' public `config.json`
//! (`moe_intermediate_size`, `num_hidden_layers`, `first_k_dense_replace`) for the rest.

use serde::{Deserialize, Serialize};

/// One model's MoE dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPreset {
    /// Canonical name (lower case, as accepted by `--model`).
    pub name: String,
    pub d_model: u32,
    /// Per-expert FFN width.
    pub d_ffn: u32,
    /// Routed experts per MoE layer.
    pub experts: u32,
    pub top_k: u32,
    /// Always-active shared experts (same width as a routed expert), 0 if none.
    pub shared_experts: u32,
    /// MoE layers.
    pub layers: u32,
}

impl ModelPreset {
    /// Bytes of one expert at int8: W_gate + W_up (d_model×d_ffn each) + W_down (d_ffn×d_model).
    pub fn expert_bytes(&self) -> u64 {
        3 * self.d_model as u64 * self.d_ffn as u64
    }
    /// Bytes of one micro-slice k of `m` (columns `[k·F/M, (k+1)·F/M)`).
    pub fn micro_slice_bytes(&self, k: u32, m: u32) -> u64 {
        let f = self.d_ffn as u64;
        let (a, b) = (k as u64 * f / m as u64, (k as u64 + 1) * f / m as u64);
        3 * self.d_model as u64 * (b - a)
    }
}

/// (canonical name, aliases, d_model, d_ffn, experts, top_k, shared, MoE layers)
type Row = (&'static str, &'static [&'static str], u32, u32, u32, u32, u32, u32);

/// The presets. Per-expert sizes quoted are int8 MiB = 3·d_model·d_ffn / 2^20.
const PRESETS: &[Row] = &[
    // SPEC §3 (FSE-DP paper Table I).
    // Phi-3.5-MoE: 4096 / 3200 / 16 experts top-2, 32 layers all MoE. 37.5 MiB/expert.
    ("phi-3.5-moe", &["phi3.5-moe", "phi-3.5-moe-instruct", "phi35-moe"], 4096, 3200, 16, 2, 0, 32),
    // Yuan2.0-M32: 2048 / 4096 / 32 experts top-2, 24 layers. 24 MiB/expert.
    ("yuan2-m32", &["yuan2.0-m32", "yuan-2.0-m32", "yuan2m32"], 2048, 4096, 32, 2, 0, 24),
    // DeepSeek-MoE-16B: 2048 / 1408 / 64 routed top-6 + 2 shared; 28 layers, first dense -> 27 MoE. 8.25 MiB/expert.
    ("deepseek-moe-16b", &["deepseekmoe-16b", "deepseek-moe"], 2048, 1408, 64, 6, 2, 27),
    // Qwen3-30B-A3B: 2048 / 768 / 128 top-8, 48 layers. 4.5 MiB/expert.
    ("qwen3-30b-a3b", &["qwen3-30b", "qwen3-a3b"], 2048, 768, 128, 8, 0, 48),
    // SPEC §4 (MoEntwine paper Table I).
    // DeepSeek-V3: hidden 7168, 256 experts top-8, moe_intermediate 2048: 3·7168·2048 = 42 MiB
    // (paper 42 MB). 1 shared expert; 61 layers, first 3 dense -> 58 MoE.
    ("deepseek-v3", &["deepseek-v3-671b", "dsv3"], 7168, 2048, 256, 8, 1, 58),
    // Qwen3-235B-A22B: hidden 4096, 128 experts top-8, moe_intermediate 1536: 18 MiB (paper 18 MB); 94 layers.
    ("qwen3-235b", &["qwen3-235b-a22b"], 4096, 1536, 128, 8, 0, 94),
    // DeepSeek-V2: hidden 5120, 160 experts top-6, moe_intermediate 1536: 22.5 MiB = 23.6 MB
    // (paper 23 MB). 2 shared experts; 60 layers, first dense -> 59 MoE.
    ("deepseek-v2", &["deepseek-v2-236b", "dsv2"], 5120, 1536, 160, 6, 2, 59),
    // DBRX: hidden 6144, 16 experts top-4, ffn 10752: 189 MiB (paper 189 MB); 40 layers.
    ("dbrx", &["dbrx-132b", "dbrx-instruct"], 6144, 10752, 16, 4, 0, 40),
    // Mixtral-8x22B: hidden 6144, 8 experts top-2, ffn 16384: 288 MiB (paper 288 MB); 56 layers.
    ("mixtral-8x22b", &["mixtral-8x22b-v0.1", "mixtral8x22b"], 6144, 16384, 8, 2, 0, 56),
    // DeepSeek-V2-Lite (Sem-MoE's evaluation model, sem-moe.txt L268: "64 routed experts per
    // layer"); the rest from its public config.json (the paper prints no other dimension):
    // hidden_size 2048, moe_intermediate_size 1408, n_shared_experts 2,
    // num_experts_per_tok 6, num_hidden_layers 27 with first_k_dense_replace 1 -> 26 MoE
    // layers. 8.25 MiB/expert.
    ("deepseek-v2-lite", &["deepseek-v2-lite-chat", "dsv2-lite"], 2048, 1408, 64, 6, 2, 26),
    // OLMoE-1B-7B (the real decode trace in shared/traces): 2048 / 1024 / 64 top-8, 16 layers. 6 MiB/expert.
    ("olmoe-1b-7b", &["olmoe", "olmoe-1b-7b-0924"], 2048, 1024, 64, 8, 0, 16),
    // Functional mode: tiny dimensions so real int8 data can travel the whole dataflow.
    ("functional", &["tiny"], 64, 48, 16, 2, 0, 1),
];

/// Every preset, in table order.
pub fn all_models() -> Vec<ModelPreset> {
    PRESETS.iter().map(row_to_preset).collect()
}

fn row_to_preset(r: &Row) -> ModelPreset {
    ModelPreset { name: r.0.into(), d_model: r.2, d_ffn: r.3, experts: r.4, top_k: r.5, shared_experts: r.6, layers: r.7 }
}

/// Canonical names of every preset.
pub fn model_names() -> Vec<&'static str> {
    PRESETS.iter().map(|r| r.0).collect()
}

/// Looks a model up by canonical name or alias (case-insensitive, `_` = `-`).
/// Unknown names are an error listing the known ones.
pub fn model_by_name(name: &str) -> crate::Result<ModelPreset> {
    let n = name.trim().to_ascii_lowercase().replace('_', "-");
    PRESETS
        .iter()
        .find(|r| r.0 == n || r.1.contains(&n.as_str()))
        .map(row_to_preset)
        .ok_or_else(|| crate::Error::UnknownModel { name: name.to_string(), known: model_names().join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expert_bytes_match_paper_mb() {
        let mib = |n: &str| model_by_name(n).unwrap().expert_bytes() as f64 / (1u64 << 20) as f64;
        assert_eq!(mib("deepseek-v3"), 42.0);
        assert_eq!(mib("qwen3-235b"), 18.0);
        assert!((mib("deepseek-v2") - 22.5).abs() < 1e-9);
        assert_eq!(mib("dbrx"), 189.0);
        assert_eq!(mib("mixtral-8x22b"), 288.0);
    }

    #[test]
    fn lookup_aliases_and_error() {
        assert_eq!(model_by_name("Qwen3_30B_A3B").unwrap().experts, 128);
        assert_eq!(model_by_name("olmoe").unwrap().name, "olmoe-1b-7b");
        let e = model_by_name("gpt-5").unwrap_err().to_string();
        assert!(e.contains("qwen3-30b-a3b") && e.contains("functional"), "{e}");
        let f = model_by_name("functional").unwrap();
        assert_eq!((f.d_model, f.d_ffn, f.experts, f.top_k), (64, 48, 16, 2));
        let m = model_by_name("qwen3-30b-a3b").unwrap();
        assert_eq!((0..8).map(|k| m.micro_slice_bytes(k, 8)).sum::<u64>(), m.expert_bytes());
    }
}
