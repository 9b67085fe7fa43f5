"""The published schema set: finding the files, the bundle, validating records, generating them.

`files` needs nothing beyond the standard library; `validator` needs the `cli` extra (jsonschema),
`strategies` the `fuzz` extra (hypothesis, hypothesis-jsonschema). Import those modules directly.
"""

from lionmsg.schema.files import (
    BUNDLE_NAME,
    KINDS,
    kind_of_class,
    load_bundle,
    load_schema,
    schema_dir,
    schema_names,
)
from lionmsg.schema.patterns import python_pattern

__all__ = [
    "BUNDLE_NAME",
    "KINDS",
    "kind_of_class",
    "load_bundle",
    "load_schema",
    "python_pattern",
    "schema_dir",
    "schema_names",
]
