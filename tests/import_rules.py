"""An import-linter contract type for the tests (pyproject.toml): no module imports a test module
(`test_*.py`); what tests share goes in a helper module of their directory, or in tests/support."""

from __future__ import annotations

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output


class NoTestModuleImports(Contract):
    """Configuration: `containers`, the packages whose test modules nothing may import."""

    type_name = "no_test_module_imports"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        containers: list[str] = self.containers  # type: ignore[assignment]
        test_modules = {
            module
            for container in containers
            for module in graph.find_descendants(container)
            if module.rsplit(".", 1)[-1].startswith("test_")
        }
        broken = sorted(
            (importer, imported)
            for imported in test_modules
            for importer in graph.find_modules_that_directly_import(imported)
        )
        return ContractCheck(kept=not broken, metadata={"imports": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, imported in check.metadata["imports"]:
            output.print_error(f"{importer} imports the test module {imported}", bold=False)
            output.new_line()
