"""Errors raised while loading or rendering a contract.

    ContractError            a contract is unusable: names the file, the field and the reason
    ├── ContractNotFound     a bare contract name matched no file in the search path
    └── RenderError          a prompt template could not be rendered for one input

Certification never raises these for a bad *output*: output problems are evidence, recorded in
the certification (see `jobrouter.contracts.certification`). Provider failures stay `ProviderError`.
"""

from __future__ import annotations


class ContractError(Exception):
    """A contract (file or in-code model) is unusable.

    `file` is where the contract came from (None for a contract built in code), `field` the
    dotted location inside it (e.g. ``sampling.min_agreement`` or ``line 4, column 7``), and
    `reason` what is wrong. `str()` joins the known parts: ``file: field: reason``.
    """

    def __init__(self, reason: str, *, file: str | None = None, field: str | None = None) -> None:
        self.reason = reason
        self.file = file
        self.field = field
        super().__init__(self._message())

    def _message(self) -> str:
        return ": ".join(part for part in (self.file, self.field, self.reason) if part)

    def __str__(self) -> str:
        return self._message()


class ContractNotFound(ContractError):
    """A bare contract name did not resolve to a file; `reason` lists the places searched."""


class RenderError(ContractError):
    """A prompt template failed for one input (missing variable, sandbox refusal, type error).

    `template` is ``system``, ``user`` or ``examples[i]``; `variable` is the undefined name when
    the failure is a missing variable. The message starts with the contract name.
    """

    def __init__(
        self,
        reason: str,
        *,
        contract: str,
        template: str,
        variable: str | None = None,
    ) -> None:
        self.contract = contract
        self.template = template
        self.variable = variable
        super().__init__(reason, file=f"contract {contract}", field=f"prompt.{template}")
