"""The ODE block over a transformers decoder layer, for any family (torch and transformers only).

A block integrates the field F of its pre-norm layer over [0, T] in N steps of the configured
tableau, the layer's parameters reused at every stage:

    k_i = F(z_n + h Σ_{j<i} a_ij k_j),   z_{n+1} = z_n + h Σ_i w_i k_i,

F built by :func:`ode_seq.fields.layer_field` from the layer's two branches, a(x) = Attn(Norm₁ x)
and m(x) = MLP(Norm₂ x) (the family's accessors); the residual-branch form is
F(z) = a(z) + m(z + a(z)), so Euler with one step of size 1 is the family's own layer. Every
evaluation of a gets the layer's mask and positions (the same rotary embeddings or learned
positions at every stage) and its own key/value cache (:mod:`.stage_caches`; a block of one
evaluation uses its layer of the cache as the family's layer does). A block that is its family's
layer (:meth:`ODEDecoderBlock.is_family_layer`) runs the family's forward. The solvers, their
stage weights and PCformer's corrector are ode-seq's (:class:`ode_seq.solvers.StackSolvers`).
"""

import inspect
from dataclasses import replace
from typing import Any, Callable, ClassVar, List, Optional, Tuple

from torch import Tensor, nn
from transformers import initialization as init

from ode_seq.fields import Sublayer, layer_field
from ode_seq.solvers.coefficients import EMAWeights, FixedWeights, FreeWeights, MultistepCorrector, StageGate
from ode_seq.solvers.fixed_grid import FixedGridSolver, SplitField
from ode_seq.solvers.stack_solvers import StackSolvers
from ode_seq.solvers.tableaus import get_tableau

from .settings import check_settings
from .stage_caches import StageCaches

Branch = Callable[..., Tensor]


def decoder_solvers(config: Any) -> Tuple[List[FixedGridSolver], Optional[nn.Module]]:
    """The solvers of the decoder's blocks in order, and the stack's one gate for
    ``learned-shared`` coefficients (else None; otherwise each block has its own weights)."""
    check_settings(config)
    solvers = StackSolvers(
        get_tableau(config.decoder_ode_method),
        config.num_hidden_layers,
        config.hidden_size,
        steps=config.decoder_ode_steps,
        interval=config.decoder_ode_interval,
        coefficients=config.ode_coefficients,
        corrector=config.decoder_ode_corrector,
        corrector_history=config.decoder_ode_corrector_history,
    )
    blocks = [solvers.next() for _ in range(config.num_hidden_layers)]
    return blocks, solvers.shared_gate


class ODEDecoderBlock:
    """Mixin before a family's decoder layer class: the layer's forward becomes the solve.
    ``attention_branch(layer, x, **attention)`` and ``mlp_branch(layer, x)`` are the family's
    accessors of a and m; ``layer_signature`` the family layer's forward signature (how its model
    passes the arguments)."""

    attention_branch: ClassVar[Branch]
    mlp_branch: ClassVar[Branch]
    layer_signature: ClassVar[inspect.Signature]

    def __init__(self, config: Any, layer_idx: int, solver: FixedGridSolver, shared: bool = False) -> None:
        super().__init__(config, layer_idx)
        self.layer_idx = layer_idx
        self.field_form, self.scope = config.ode_field, config.ode_scope
        self.solver = solver
        if not shared:
            self.combiner = solver.combine
        corrector = getattr(solver, "corrector", None)
        if corrector is not None:
            self.corrector = corrector
        self._registered: Tuple[tuple, FixedGridSolver] = ((), solver)  # registered_solver's: (its parts, it)

    def registered_solver(self) -> FixedGridSolver:
        """The solver with the weights registered on the block now: peft's ``modules_to_save``, for
        one, puts a trainable copy of ``combiner`` or ``corrector`` in the original's place (made
        again only when the solver or one of them changes)."""
        weights = {name: self._modules[name] for name in ("combiner", "corrector") if name in self._modules}
        parts = (self.solver, *weights.values())
        made_from = self._registered[0]
        if len(made_from) != len(parts) or any(old is not new for old, new in zip(made_from, parts)):
            renamed = {"combine" if name == "combiner" else name: module for name, module in weights.items()}
            self._registered = (parts, replace(self.solver, **renamed) if renamed else self.solver)
        return self._registered[1]

    def is_family_layer(self, solver: FixedGridSolver) -> bool:
        """Whether ``solver``'s solve is the family's layer: one step of size 1 of a one-stage method
        with the tableau's b = (1) (Euler), no corrector, on y = z + a(z) + m(z + a(z)) (the
        residual-branch field, or the sublayers one after the other), no stage to checkpoint."""
        return (
            solver.tableau.b == (1.0,)
            and solver.steps == 1
            and solver.interval == 1.0
            and isinstance(solver.combine, (type(None), FixedWeights))
            and getattr(solver, "corrector", None) is None
            and not solver.checkpoint_stages
            and (self.scope == "sublayer" or self.field_form == "residual-branch")
        )

    def attention_arguments(self, hidden_states: Tensor, args: tuple, kwargs: dict) -> Tuple[Any, dict]:
        """(cache, the other arguments for the attention) from the layer's call as its model makes it."""
        if args:  # named by the layer's signature (GPT-2 passes some positionally)
            bound = self.layer_signature.bind(self, hidden_states, *args, **kwargs).arguments
            own = ("self", "hidden_states", "kwargs")
            arguments = {name: value for name, value in bound.items() if name not in own}
            arguments.update(bound.get("kwargs", {}))
        else:
            arguments = dict(kwargs)
        if arguments.pop("encoder_hidden_states", None) is not None:
            raise ValueError("an ODE decoder block has no cross-attention: build it with add_cross_attention=False")
        arguments.pop("encoder_attention_mask", None)
        return arguments.pop("cache", None), arguments

    def forward(self, hidden_states: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        """y(T) from y(0) = ``hidden_states``, the arguments as the family's model passes its layers."""
        solver = self.registered_solver()
        if self.is_family_layer(solver):
            return super().forward(hidden_states, *args, **kwargs)
        cache, attention = self.attention_arguments(hidden_states, args, kwargs)
        evaluations = solver.evaluations_per_step  # of one step's attention (a split field's MLP parts keep no cache)
        slots = solver.steps * evaluations  # one evaluation: the family's own cache, as its layer uses it
        caches = StageCaches(cache, self.layer_idx, slots) if cache is not None and slots > 1 else None

        def attention_part(t: float, z: Tensor, step: int, stage: int) -> Tensor:
            evaluation = cache if caches is None else caches.evaluation(step * evaluations + stage)
            return self.attention_branch(z, cache=evaluation, **attention)

        def mlp_part(t: float, z: Tensor, step: int, stage: int) -> Tensor:
            return self.mlp_branch(z)

        if self.scope == "sublayer":
            field = SplitField((attention_part, mlp_part))
        else:

            def field(t: float, z: Tensor, step: int, stage: int) -> Tensor:
                a = Sublayer(lambda x: attention_part(t, x, step, stage))
                return layer_field(self.field_form, z, [a, Sublayer(self.mlp_branch)])

        y = solver.solve(field, hidden_states)
        if caches is not None:
            caches.commit()
        return y


def init_ode_weights(module: nn.Module, gates: List[nn.Module]) -> None:
    """ode-seq's initial values of the weights a block's solver owns, for a model built from a
    config and for the weights an upcycled checkpoint lacks (transformers initialises only those
    missing; it would give a gate's Linear normal(0, initializer_range), and leave the parameters
    of modules it does not know as allocated: measured, free, EMA and corrector weights of about
    ±1e32): a gate's projection (one of ``gates``) Xavier-uniform with β = 0; free, EMA and corrector
    weights their modules' ``initial_values`` (b or 1, β = ½, α and β_j = 1/(m + 2))."""
    if any(module is gate.proj for gate in gates):
        init.xavier_uniform_(module.weight)
        init.zeros_(module.bias)
    elif isinstance(module, (FreeWeights, EMAWeights, MultistepCorrector)):
        for name, value in module.initial_values().items():
            init.copy_(getattr(module, name), value)


def stage_gates(model: nn.Module) -> List[nn.Module]:
    """The learned stage gates of ``model``'s blocks."""
    return [module for module in model.modules() if isinstance(module, StageGate)]
