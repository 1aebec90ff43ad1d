"""Matplotlib figures of the analyses; every function takes plain numbers and writes one PNG.

Each figure has a title, labelled axes and (where colours encode something) a legend or a
colour bar. The Agg backend is selected, so no display is needed.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Mapping, Sequence

logging.getLogger("matplotlib").setLevel(logging.WARNING)  # before import: it logs on import

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DPI = 90
MAX_DISCRETE_DEPTHS = 24
STAGE_COLORS = plt.get_cmap("tab10").colors
PRODUCT_TITLES = {
    "self_qk": "self-attention  $W_Q^h W_K^{h\\top}/\\sqrt{d_h}$",
    "self_vo": "self-attention  $W_V^h W_O^h$",
    "cross_qk": "cross-attention  $W_Q^h W_K^{h\\top}/\\sqrt{d_h}$",
    "cross_vo": "cross-attention  $W_V^h W_O^h$",
    "ffn": "feed-forward  $W_1 W_2$",
}


def _save(fig, path: str) -> None:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _axes_grid(rows: int, cols: int, width: float, height: float):
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes


def plot_trajectory_norms(stats: Mapping[str, Sequence[Mapping]], path: str) -> None:
    """Per stack: ‖state‖ at stage inputs along depth; mean ‖k_i‖ per block and stage i.

    ``stats[stack]`` is the list of per-block statistics of :mod:`.trajectories`.
    """
    stacks = [s for s in stats if stats[s]]
    fig, axes = _axes_grid(len(stacks), 2, 5.2, 3.4)
    for row, stack in zip(axes, stacks):
        blocks = stats[stack]
        times, means, stds = [], [], []
        for b in blocks:
            for t, m in zip(b["stage_times"], b["stage_input_norm"]):
                times.append(t)
                means.append(m["mean"])
                stds.append(m["std"])
        times.append(blocks[-1]["end_time"])
        means.append(blocks[-1]["state_out_norm"]["mean"])
        stds.append(blocks[-1]["state_out_norm"]["std"])
        means_a, stds_a = np.array(means), np.array(stds)
        row[0].plot(times, means_a, "o-", color="black", ms=3, label="mean over tokens")
        row[0].fill_between(times, means_a - stds_a, means_a + stds_a, alpha=0.25, label="± std")
        row[0].set(title=f"{stack}: state norm along depth", xlabel="depth t (stage times)", ylabel="‖state‖ per token")
        row[0].legend(fontsize=8)
        for i in range(max(b["stages"] for b in blocks)):
            xs, ys = [], []
            for b in blocks:
                norms = [m["mean"] for m, j in zip(b["stage_output_norm"], b["stage_indices"]) if j == i]
                if norms:
                    xs.append(b["block"])
                    ys.append(float(np.mean(norms)))
            row[1].plot(xs, ys, "o-", ms=3, color=STAGE_COLORS[i % 10], label=f"$k_{i + 1}$")
        row[1].set(
            title=f"{stack}: stage output norms ({blocks[0]['method']})",
            xlabel="block l",
            ylabel="‖$k_i$‖ per token (mean over steps)",
        )
        row[1].set_xticks([b["block"] for b in blocks])
        row[1].legend(fontsize=8)
    fig.suptitle("Trajectory statistics on validation data")
    fig.tight_layout()
    _save(fig, path)


def plot_coefficients(stats: Mapping[str, Sequence[Mapping]], path: str) -> None:
    """Per stack: mean output weight w_i per block (tableau b_i dashed) and h_eff = h Σ_i w_i."""
    stacks = [s for s in stats if stats[s]]
    fig, axes = _axes_grid(len(stacks), 1, 7.5, 3.4)
    for ax, stack in zip(axes[:, 0], stacks):
        blocks = stats[stack]
        xs = [b["block"] for b in blocks]
        stages = len(blocks[0]["mean_weights"])
        for i in range(stages):
            color = STAGE_COLORS[i % 10]
            ax.plot(
                xs,
                [b["mean_weights"][i] for b in blocks],
                "o-",
                ms=4,
                color=color,
                label=f"$w_{i + 1}$ (learned, mean)",
            )
            ax.plot(
                xs,
                [b["tableau_b"][i] for b in blocks],
                "--",
                color=color,
                alpha=0.6,
                label=f"$b_{i + 1}$ ({blocks[0]['method']})",
            )
        ax.plot(
            xs, [b["effective_step_size"] for b in blocks], "s-", color="black", ms=4, label="$h_{eff} = h \\sum_i w_i$"
        )
        ax.set(title=f"{stack}: output weights ({blocks[0]['coefficients']})", xlabel="block l", ylabel="weight")
        ax.set_xticks(xs)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Learned Runge-Kutta coefficients and effective step size")
    fig.tight_layout()
    _save(fig, path)


def plot_gate_distributions(gates: Mapping[str, Sequence[np.ndarray]], path: str) -> None:
    """Per stack and stage i: violin plots over tokens of the gate value w_i, one per block.

    ``gates[stack][l]`` is an (N tokens, s) array.
    """
    stacks = [s for s in gates if len(gates[s])]
    stages = max(g.shape[1] for s in stacks for g in gates[s])
    shown = [i for i in range(stages) if not (stages == 2 and i == 1)]
    fig, axes = _axes_grid(len(stacks), len(shown), 5.0, 3.2)
    for row, stack in zip(axes, stacks):
        for ax, i in zip(row, shown):
            data = [g[:, i] for g in gates[stack]]
            ax.violinplot(data, positions=range(len(data)), showmedians=True)
            name = "g = $w_1$ ($w_2$ = 1 − g)" if stages == 2 else f"$w_{i + 1}$"
            ax.set(title=f"{stack}: gate {name}", xlabel="block l", ylabel="gate value per token", ylim=(-0.02, 1.02))
            ax.set_xticks(range(len(data)))
    fig.suptitle("Distributions of learned gate values over validation tokens")
    fig.tight_layout()
    _save(fig, path)


def _depth_norm(depths: np.ndarray) -> matplotlib.colors.Normalize:
    """One colour per depth for up to MAX_DISCRETE_DEPTHS layers, else a continuous scale."""
    if len(depths) == 1:
        return matplotlib.colors.Normalize(depths[0] - 0.5, depths[0] + 0.5)
    if len(depths) <= MAX_DISCRETE_DEPTHS:
        middle = (depths[1:] + depths[:-1]) / 2
        edges = np.concatenate([[2 * depths[0] - middle[0]], middle, [2 * depths[-1] - middle[-1]]])
        return matplotlib.colors.BoundaryNorm(edges, plt.get_cmap("viridis").N)
    return matplotlib.colors.Normalize(depths.min(), depths.max())


def plot_spectra(stack: str, layers: Sequence[Mapping[str, object]], path: str) -> None:
    """Eigenvalues in the complex plane, one panel per weight product, coloured by depth.

    ``layers[l]`` maps 'depth' to a float and each product name to an array of complex values
    (all heads together).
    """
    products = [p for p in PRODUCT_TITLES if p in layers[0]]
    depths = np.array([float(layer["depth"]) for layer in layers])
    cmap = plt.get_cmap("viridis")
    norm = _depth_norm(depths)
    cols = min(3, len(products))
    rows = -(-len(products) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.9 * cols + 1.0, 3.5 * rows + 0.4), squeeze=False, layout="constrained"
    )
    for ax, product in zip(axes.flat, products):
        for layer in layers:
            values = np.asarray(layer[product])
            ax.scatter(values.real, values.imag, s=5, linewidths=0, color=cmap(norm(float(layer["depth"]))))
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set(title=PRODUCT_TITLES[product], xlabel="Re λ", ylabel="Im λ")
        ax.title.set_fontsize(9)
    for ax in axes.flat[len(products) :]:
        ax.set_visible(False)
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes)
    if len(depths) <= MAX_DISCRETE_DEPTHS:
        bar.set_ticks(depths)
    bar.set_label("depth (layer index or t)")
    fig.suptitle(f"{stack}: weight spectra along depth (eigenvalues, all heads)")
    _save(fig, path)


def plot_spectra_along_depth(summaries: Mapping[str, Sequence[Mapping[str, object]]], path: str) -> None:
    """Per stack: spectral radius and fraction of Re λ > 0 of each product against depth.

    ``summaries[stack][l]`` maps 'depth' and, per product, a dict of :func:`spectrum_summary`.
    """
    stacks = list(summaries)
    fig, axes = _axes_grid(len(stacks), 2, 5.0, 3.2)
    for row, stack in zip(axes, stacks):
        layers = summaries[stack]
        depths = [float(layer["depth"]) for layer in layers]
        for j, product in enumerate(p for p in PRODUCT_TITLES if p in layers[0]):
            color = STAGE_COLORS[j % 10]
            for ax, key in zip(row, ("spectral_radius", "fraction_positive_real")):
                ax.plot(depths, [layer[product][key] for layer in layers], "o-", ms=3, color=color, label=product)
        if len(depths) <= MAX_DISCRETE_DEPTHS:
            for ax in row:
                ax.set_xticks(depths)
        row[0].set(title=f"{stack}: spectral radius", xlabel="depth", ylabel="max |λ|")
        row[1].set(title=f"{stack}: eigenvalues with Re λ > 0", xlabel="depth", ylabel="fraction", ylim=(-0.02, 1.02))
        row[0].legend(fontsize=7)
    fig.suptitle("Weight spectra summary along depth")
    fig.tight_layout()
    _save(fig, path)


def plot_lyapunov_heatmap(panels: Mapping[str, Mapping[str, object]], path: str) -> None:
    """Per stack: running max exponent of the last position w.r.t. each token, by solver step.

    ``panels[stack]`` has 'tokens' (labels) and 'running_max_by_step' (steps × T).
    """
    stacks = list(panels)
    widths = [max(len(panels[s]["tokens"]), 4) for s in stacks]
    fig, axes = plt.subplots(
        len(stacks), 1, squeeze=False, figsize=(min(2.5 + 0.42 * max(widths), 16), 2.6 * len(stacks) + 0.6)
    )
    for ax, stack in zip(axes[:, 0], stacks):
        grid = np.asarray(panels[stack]["running_max_by_step"])
        tokens: List[str] = list(panels[stack]["tokens"])
        tokens[-1] += " (j)"
        # Position j itself keeps its identity path (exponent near 0) and would flatten the
        # colour scale of the others: the scale spans the tokens k ≠ j, and j is clipped.
        others = grid[:, :-1] if grid.shape[1] > 1 else grid
        image = ax.imshow(
            grid,
            aspect="auto",
            cmap="magma",
            origin="lower",
            vmin=others.min(),
            vmax=max(others.max(), others.min() + 1e-6),
        )
        ax.set_xticks(range(len(tokens)))
        ax.set_xticklabels(tokens, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(grid.shape[0]))
        ax.set_yticklabels([str(l + 1) for l in range(grid.shape[0])])
        ax.set(
            title=f"{stack}: FTLE of the last position j w.r.t. token k",
            xlabel="input token k",
            ylabel="after solver step",
        )
        fig.colorbar(image, ax=ax, extend="max").set_label("max exponent (k ≠ j)")
    fig.suptitle("Token-level finite-time Lyapunov exponents (QR method)")
    fig.tight_layout()
    _save(fig, path)


def plot_nfe_vs_length(lengths: Sequence[int], nfe: Sequence[float], path: str) -> None:
    """Scatter of function evaluations of an adaptive solve against source length."""
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    ax.scatter(lengths, nfe, s=12)
    ax.set(
        title="Adaptive solver: NFE against sentence length",
        xlabel="source length (tokens)",
        ylabel="function evaluations (NFE)",
    )
    fig.tight_layout()
    _save(fig, path)


def plot_score_vs_steps(steps: Sequence[int], scores: Sequence[float], metric: str, path: str) -> None:
    """Line of a quality score against the number of solver steps."""
    order = np.argsort(steps)
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    ax.plot(np.asarray(steps)[order], np.asarray(scores)[order], "o-")
    ax.set(title=f"Step-count adaptation: {metric} against steps", xlabel="solver steps", ylabel=metric)
    fig.tight_layout()
    _save(fig, path)


def plot_teacher_errors(errors: Mapping[str, Sequence[Mapping[str, float]]], path: str) -> None:
    """Per stack: the relative error ‖X(t_ℓ) − h^ℓ‖/‖h^ℓ‖ of the student at every teacher layer."""
    stacks = [s for s in errors if errors[s]]
    fig, axes = _axes_grid(1, len(stacks), 4.6, 3.4)
    for ax, stack in zip(axes[0], stacks):
        layers = [e["layer"] for e in errors[stack]]
        ax.bar(layers, [e["relative"] for e in errors[stack]], color="tab:blue")
        ax.set(
            title=f"{stack}: student against teacher",
            xlabel="teacher layer ℓ (at its control time)",
            ylabel="relative error ‖X(t_ℓ) − $h^ℓ$‖ / ‖$h^ℓ$‖",
        )
        ax.set_xticks(layers)
    fig.suptitle("Trajectory distillation: per-layer error on validation data")
    fig.tight_layout()
    _save(fig, path)


def spectra_points(layers: Sequence[Mapping[str, object]]) -> List[Dict[str, object]]:
    """Flatten per-head eigenvalue lists into one array per product, for :func:`plot_spectra`."""
    flat = []
    for layer in layers:
        entry: Dict[str, object] = {"depth": layer["depth"]}
        for product in PRODUCT_TITLES:
            if product in layer:
                value = layer[product]
                entry[product] = np.concatenate(value) if isinstance(value, list) else value
        flat.append(entry)
    return flat


def plot_score_against_compute(
    curves: Mapping[str, Sequence[Sequence[Sequence[float]]]],
    points: Mapping[str, Sequence[Sequence[float]]],
    front: Sequence[Sequence[float]],
    metric: str,
    curve_metric: str,
    path: str,
) -> None:
    """Left: every run's validation curve against its training FLOPs (``curves``: configuration →
    runs → (FLOPs, value) pairs). Right: each run's test score at its scored checkpoint against the
    training FLOPs spent to reach it (``points``: configuration → (FLOPs, score) pairs), with the
    Pareto front (``front``, by increasing FLOPs) drawn through the runs no other run beats on both.
    One legend for both, below them, where it hides no run."""
    legend_height = 0.25 * -(-(len(points) + 1) // 2)  # inches: two entries a row, the configurations and the front
    fig, (along, scored) = plt.subplots(1, 2, figsize=(11, 4.5 + legend_height))
    for index, config in enumerate(points):
        for run in curves.get(config, []):
            flops, values = zip(*run)
            along.plot(flops, values, color=STAGE_COLORS[index % 10])
        flops, scores = zip(*points[config])
        scored.plot(flops, scores, "o", color=STAGE_COLORS[index % 10], label=config)
    scored.plot(*zip(*front), "--", color="black", drawstyle="steps-post", label="Pareto front")
    along.set(xscale="log", yscale="log", xlabel="training FLOPs", ylabel=curve_metric, title="Along training")
    for set_formatter in (along.yaxis.set_major_formatter, along.yaxis.set_minor_formatter):
        set_formatter(matplotlib.ticker.ScalarFormatter())  # 30, 40, 60 rather than 3×10¹
    for axes in (along, scored):  # within a decade the minor labels of a log axis overlap
        axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    scored.set(xscale="log", xlabel="training FLOPs to the scored checkpoint", ylabel=metric, title="Every run")
    fig.legend(*scored.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, legend_height / fig.get_figheight(), 1, 1))
    _save(fig, path)
