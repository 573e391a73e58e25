// The plan page: one self-contained HTML file (no network, no external script or style) of a ranked search, to share
// with a team: the ranked layouts (sortable), the Pareto front of step time against peak memory with the bands, the
// per-stage memory bars and step-time breakdown of the layout clicked, where the coefficients came from, and that
// layout's launch command with a copy button. Colours from the Okabe-Ito palette (distinct under the common colour
// blindnesses), every bar also labelled; print hides the controls.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "headroom/estimator/plan.hpp"
#include "headroom/estimator/search.hpp"

namespace headroom::cli {

// The page's data for a search (cmd_rank.cpp): rank's --json document and, per row of res.best, its estimate and
// Megatron-LM launch line, and with `mtsl_curve` its MTSL curve (mtsl_curve_json). A row may carry a "label" (check's
// "the command"), shown before its layout.
[[nodiscard]] nlohmann::json plan_page_json(const Plan& r, const Layout& base, const SearchOptions& so,
                                            const SearchResult& res, bool mtsl_curve);

// A layout's peak memory against sequence length, at its batch: {"mtsl_tokens", "mtsl_tokens_interval" (the held-out
// band of the peak's MTSLs, or null), "capped", "binding_stage", "binding_term", "capacity_gib", "points": [{"seq",
// "peak_gib", "peak_gib_interval"}]}, 24 lengths from the shortest valid one to 1.5 times the longer of the MTSL and
// the layout's seq (4 times the seq when the MTSL is capped).
[[nodiscard]] nlohmann::json mtsl_curve_json(const Plan& r, const Layout& l);

// `doc`: rank's --json document with "details": one entry per row of "layouts", each {"estimate": estimate --json's
// memory and perf, "launch": the Megatron-LM line}. The page reads `#select=N` to open row N as a click would.
[[nodiscard]] std::string plan_page_html(const nlohmann::json& doc);

}  // namespace headroom::cli
