"""Behaviour of the content dataclasses.

The data shape (fields, defaults, record loader and serializer) is generated from
`schemas/content/*.schema.json` into `lionmsg/generated/content.py`; each generated class derives
from the behaviour class its schema names in `x-lionmsg-behaviour`, defined in this package.
"""
