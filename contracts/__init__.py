"""Contracts: what a task needs from any provider, and the certification that a provider meets it.

Load a contract (`load_contract`), render its prompt for a job (`build_request`), judge an answer
(`check_output`, `validate_output`, `run_checks`), and certify a provider against its golden cases
(`certify` → `Certification`). Pure logic: no database, no router; providers are reached only
through the `jobrouter.providers.Provider` seam.
"""

from jobrouter.contracts.agreement import Agreement, measure_agreement
from jobrouter.contracts.certification import (
    CaseEvidence,
    Certification,
    RenderingEvidence,
    Validity,
)
from jobrouter.contracts.certify import ProgressCallback, certify, certify_case
from jobrouter.contracts.checks import (
    CheckFailure,
    check_output,
    run_checks,
    validate_input,
    validate_output,
)
from jobrouter.contracts.errors import ContractError, ContractNotFound, RenderError
from jobrouter.contracts.fingerprint import contract_fingerprint
from jobrouter.contracts.loader import (
    contract_from_data,
    contract_from_yaml,
    library_contracts,
    load_contract,
)
from jobrouter.contracts.model import (
    CallableCheck,
    Case,
    CheckSpec,
    ContainsCheck,
    Contract,
    EqualsCheck,
    ExampleMessage,
    IsNullCheck,
    MaxLengthCheck,
    NotNullCheck,
    NumberCheck,
    OneOfCheck,
    Prompt,
    RegexCheck,
    Sampling,
)
from jobrouter.contracts.render import build_request, render_messages

__all__ = [
    "Agreement",
    "CallableCheck",
    "Case",
    "CaseEvidence",
    "Certification",
    "CheckFailure",
    "CheckSpec",
    "ContainsCheck",
    "Contract",
    "ContractError",
    "ContractNotFound",
    "EqualsCheck",
    "ExampleMessage",
    "IsNullCheck",
    "MaxLengthCheck",
    "NotNullCheck",
    "NumberCheck",
    "OneOfCheck",
    "ProgressCallback",
    "Prompt",
    "RegexCheck",
    "RenderError",
    "RenderingEvidence",
    "Sampling",
    "Validity",
    "build_request",
    "certify",
    "certify_case",
    "check_output",
    "contract_fingerprint",
    "contract_from_data",
    "contract_from_yaml",
    "library_contracts",
    "load_contract",
    "measure_agreement",
    "render_messages",
    "run_checks",
    "validate_input",
    "validate_output",
]
