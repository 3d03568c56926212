"""The optimiser loop: optuna's TPE sampler through its ask/tell interface over a `TuningSpace`.

    search = Search(space, budget=7, seed=0)
    while not search.done:
        batch = search.propose(2)                 # up to 2 configs that need a measurement (one per worker)
        search.report([(trial, Outcome(value=measure(config))) for trial, config in batch])
    search.best, search.trials                    # the best config; one TrialRecord per trial

Why TPE (optuna): the spaces are small products of categorical choices (3 x 3 x 3 tiles; 7 x 5 x 3 x 2^4 block
options) with invalid combinations. TPE models categorical parameters directly (CMA-ES needs continuous ones),
takes infeasible trials through `constraints_func` (it learns to avoid them without our spending a measurement),
runs in parallel batches with `constant_liar` (pending trials count as bad, so one batch does not repeat itself),
and is deterministic under a seed. Kernel Tuner's strategies would also fit, but it wants to own compilation and
timing (its own backends), where the workbench has its own pipeline and measuring method.

Rules of the loop:
- a config the kernel refuses (`space.check` raises) is told to the study as infeasible and never measured:
  state "invalid", no evaluation spent;
- a config measured before is answered from the table: state "repeat", no evaluation spent (TPE re-proposes
  points of small categorical spaces often);
- where TPE keeps proposing configs that cost no measurement (repeats, invalid ones: `MAX_REPEATS` in a row), a random unmeasured valid config (seeded) is
  enqueued instead: `proposed_by` "fallback";
- `budget` counts measurements (states "complete", "wrong", "failed", "invalid on device" does not count); the
  search ends there, or when every valid config is measured.
"""
from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass, field

from .space import TuningSpace, config_label

__all__ = ["Search", "Outcome", "TrialRecord", "minimize", "MAX_REPEATS", "COUNTED_STATES"]

MAX_REPEATS = 20
COUNTED_STATES = ("complete", "wrong", "failed")


@dataclass
class Outcome:
    value: float | None = None          # the objective (lower is better); None unless state is "complete"
    state: str = "complete"             # complete | wrong (measured, wrong results) | failed | invalid on device
    note: str | None = None
    rows: list = field(default_factory=list)   # the measurement rows behind it


@dataclass
class TrialRecord:
    trial: int
    config: dict
    state: str
    value: float
    evaluations: int        # measurements spent after this trial
    best_so_far: float
    proposed_by: str
    note: str | None = None
    rows: list = field(default_factory=list)


class Search:
    """One study over `space`, minimising the objective with at most `budget` measurements."""

    def __init__(self, space: TuningSpace, budget: int, seed: int = 0, *, n_startup: int | None = None):
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"budget must be a positive int (measurements), got {budget!r}")
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space, self.budget, self.seed = space, budget, seed
        self.valid = space.valid()
        if not self.valid:
            raise ValueError(f"{space.kernel}: no valid config for problem {space.problem}")
        self._valid_keys = {config_label(c) for c in self.valid}
        self._dists = {n: optuna.distributions.CategoricalDistribution(list(c)) for n, c in space.params.items()}
        # random start: about a third of the budget, at least 2 (TPE needs points on both sides of its split)
        n_startup = max(2, min(10, budget // 3)) if n_startup is None else n_startup
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup, multivariate=True,
                                                 constant_liar=True, constraints_func=_constraints)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._rng = random.Random(seed)
        self.trials: list[TrialRecord] = []
        self.measured: dict[str, Outcome] = {}     # config label -> its outcome
        self.device_invalid: set[str] = set()
        self.evaluations = 0
        self.pending: dict[int, tuple] = {}        # trial number -> (optuna trial, config, proposed_by)
        self._repeats = 0

    # -- state --------------------------------------------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.budget - self.evaluations - len(self.pending)

    @property
    def unmeasured(self) -> list[dict]:
        taken = set(self.measured) | self.device_invalid | {config_label(c) for _, c, _ in self.pending.values()}
        return [c for c in self.valid if config_label(c) not in taken]

    @property
    def done(self) -> bool:
        return not self.pending and (self.evaluations >= self.budget or not self.unmeasured)

    @property
    def best(self) -> TrialRecord | None:
        done = [t for t in self.trials if t.state == "complete" and math.isfinite(t.value)]
        return min(done, key=lambda t: (t.value, t.trial)) if done else None

    # -- ask ----------------------------------------------------------------------------------------------------
    def propose(self, n: int = 1) -> list[tuple[int, dict]]:
        """Up to `n` configs to measure (fewer near the end of the budget or of the space), as (trial number,
        config). Invalid configs and repeats met on the way are recorded at once."""
        out = []
        while len(out) < n and self.remaining > 0 and self.unmeasured:
            proposed_by = "tpe"
            if self._repeats >= MAX_REPEATS:
                self.study.enqueue_trial(self._rng.choice(self.unmeasured))
                proposed_by, self._repeats = "fallback", 0
            trial = self.study.ask(self._dists)
            config = {n_: trial.params[n_] for n_ in self.space.params}
            key = config_label(config)
            if key not in self._valid_keys or key in self.device_invalid:
                try:
                    self.space.check(config)
                    note = next((t.note for t in self.trials if config_label(t.config) == key and t.note), None)
                except ValueError as error:
                    note = str(error)
                self._tell(trial, config, Outcome(state="invalid", note=note), proposed_by, counted=False)
                self._repeats += 1
                continue
            pending_keys = {config_label(c) for _, c, _ in self.pending.values()}
            if key in self.measured or key in pending_keys:
                self._repeats += 1
                if key in self.measured:
                    old = self.measured[key]
                    self._tell(trial, config, Outcome(old.value, old.state, "repeat of a measured config"),
                               proposed_by, counted=False, state="repeat")
                else:  # in this batch already: the liar covers it; drop the trial
                    self._tell(trial, config, Outcome(state="invalid", note="repeat within the batch"), proposed_by,
                               counted=False, state="repeat")
                continue
            self._repeats = 0
            self.pending[trial.number] = (trial, config, proposed_by)
            out.append((trial.number, config))
        return out

    # -- tell ---------------------------------------------------------------------------------------------------
    def report(self, results) -> None:
        """`results`: (trial number, Outcome) pairs for proposed configs, in any order."""
        for number, outcome in results:
            trial, config, proposed_by = self.pending.pop(number)
            if outcome.state == "invalid on device":
                self.device_invalid.add(config_label(config))
                self._tell(trial, config, outcome, proposed_by, counted=False)
                continue
            self.measured[config_label(config)] = outcome
            self._tell(trial, config, outcome, proposed_by, counted=True)

    def _tell(self, trial, config, outcome: Outcome, proposed_by, *, counted: bool, state: str | None = None):
        feasible = outcome.state == "complete" and outcome.value is not None and math.isfinite(outcome.value)
        trial.set_user_attr("constraint", (0.0,) if feasible else (1.0,))
        value = float(outcome.value) if feasible else math.inf
        self.study.tell(trial, value)
        if counted:
            self.evaluations += 1
        best = self.best
        best_value = min(value if feasible else math.inf, best.value if best else math.inf)
        self.trials.append(TrialRecord(trial.number, dict(config), state or outcome.state, value, self.evaluations,
                                       best_value, proposed_by, outcome.note, list(outcome.rows)))


def _constraints(frozen_trial) -> tuple:
    return frozen_trial.user_attrs.get("constraint", (1.0,))


def minimize(space: TuningSpace, objective, *, budget: int, seed: int = 0, batch: int = 1) -> Search:
    """Run a Search on a host-side objective(config) -> value (or an Outcome): tests, and simulating on a measured
    table. Returns the finished Search."""
    search = Search(space, budget, seed)
    while not search.done:
        proposed = search.propose(batch)
        if not proposed:
            break
        results = []
        for number, config in proposed:
            got = objective(config)
            results.append((number, got if isinstance(got, Outcome) else Outcome(value=float(got))))
        search.report(results)
    return search
