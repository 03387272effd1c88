"""The statement guard for SQL typed by a user: which statements may run at all, and in a live
session which functions and tables they may touch.

User SQL runs through ``storage.sandbox.UserSql`` only, on a database DuckDB itself keeps from
files, extensions and setting changes; this check is the second wall, with clear messages. Every
statement must only read (SELECT, EXPLAIN, PRAGMA; DESCRIBE, SHOW and SUMMARIZE parse as SELECT).
A live session's database is the writer's, so SQL typed there is checked harder: only reporting
PRAGMAs, only table functions that read the catalog or generate values, nothing that reads files
by name and no function that acts on the database (checkpoints, logging, profiling, …).
"""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb

from storage.errors import QueryError

READ_ONLY_TYPES = {"SELECT", "EXPLAIN", "PRAGMA"}


def statement_types(con: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    """The type names of the statements of ``sql`` (``SELECT``, ``PRAGMA``, ...); a statement of a
    type this DuckDB's Python API has no name for (``UPDATE EXTENSIONS``) is ``UNKNOWN``, and
    refused like every other type that is not read-only."""
    try:
        stmts = con.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e
    out = []
    for s in stmts:
        try:
            out.append(s.type.name)
        except ValueError:  # "29 is not a valid StatementType"
            out.append("UNKNOWN")
    return out


def reading_statements(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[str]]:
    """(statement types, statement texts) of user SQL; ``QueryError`` unless every statement only
    reads (SELECT, EXPLAIN, PRAGMA; DESCRIBE, SHOW and SUMMARIZE parse as SELECT)."""
    types = statement_types(con, sql)
    if not types:
        raise QueryError("empty query")
    bad = [t for t in types if t not in READ_ONLY_TYPES]
    if bad:
        what = "statements of this kind are" if bad[0] == "UNKNOWN" else f"{bad[0]} statements are"
        raise QueryError(
            f"refused: {what} not allowed; telemetry SQL is read-only "
            "(SELECT, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE and PRAGMA are)"
        )
    try:
        return types, [s.query for s in con.extract_statements(sql)]
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e


_SAFE_PRAGMAS = frozenset(
    {
        "table_info",
        "show_tables",
        "show_tables_expanded",
        "show",
        "database_size",
        "database_list",
        "version",
        "storage_info",
        "platform",
        "functions",
        "collations",
        "metadata_info",
    }
)
_FILE_FUNCS = re.compile(
    r"^(read_.*|glob|.*_scan|parquet_.*|sniff_csv|query_table|query|iceberg_.*|delta_.*|"
    r"sqlite_.*|postgres_.*|mysql_.*|.*_attach|http_.*|duckdb_secrets|load_.*|install_.*|which_secret|"
    r"histogram_values|json_execute_serialized_sql|ducklake_.*)$",
    re.IGNORECASE,
)
_SAFE_TABLE_FUNCS = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "json_each",
        "json_tree",
        "repeat",
        "repeat_row",
        "pragma_table_info",
        "pragma_show",
        "pragma_database_size",
        "pragma_version",
        "pragma_platform",
        "pragma_show_tables",
        "pragma_storage_info",
        "pragma_metadata_info",
        "pragma_collations",
        "pragma_functions",
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_dependencies",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_schemas",
        "duckdb_sequences",
        "duckdb_settings",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        "duckdb_approx_database_count",
    }
)
_STATE_FUNCS = frozenset(
    {
        "checkpoint",
        "force_checkpoint",
        "write_log",
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
        "enable_profiling",
        "disable_profiling",
        "add_grammar_extension",
        "remove_grammar_extension",
        "create_external_resource",
        "register_external_resource",
        "register_external_resource_type",
        "deregister_external_resource",
        "destroy_external_resource",
        "add_parquet_key",
        "copy_database",
        "import_database",
        "set_variable",
        "nextval",
        "setseed",
    }
)


def _ast_names(node: Any, funcs: set[str], tables: set[str], table_funcs: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("function_name"), str):
            funcs.add(node["function_name"].lower())
        if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
            tables.add(node["table_name"])
        if node.get("type") == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
            name = node["function"].get("function_name")
            table_funcs.add(str(name).lower() if isinstance(name, str) else "?")
        for v in node.values():
            _ast_names(v, funcs, tables, table_funcs)
    elif isinstance(node, list):
        for v in node:
            _ast_names(v, funcs, tables, table_funcs)


def check_user_sql(con: duckdb.DuckDBPyConnection, sql: str, strict: bool) -> list[str]:
    """The statements of ``sql`` if a user may run them; raise ``QueryError`` otherwise.

    Always: reading statements only (SELECT, EXPLAIN, PRAGMA; DESCRIBE, SHOW and SUMMARIZE parse as
    SELECT). ``strict`` (the writer's database, i.e. a live session): also no file-reading functions
    or file paths as tables, only catalog and generator table functions, no function that acts on
    the database, and only reporting PRAGMAs."""
    types, stmts = reading_statements(con, sql)
    if not strict:
        return stmts
    for stmt, kind in zip(stmts, types, strict=True):
        text = stmt.strip()
        if kind == "PRAGMA":
            m = re.match(r"(?is)pragma\s+([a-z_]+)", text)
            if not m or m.group(1).lower() not in _SAFE_PRAGMAS:
                raise QueryError(
                    "refused: only reporting PRAGMAs (table_info, show_tables, …) in a live session"
                )
            continue
        if kind == "EXPLAIN":
            text = re.sub(r"(?is)^\s*explain\s+(analyze\s+)?", "", text)
        ser = con.execute("SELECT json_serialize_sql(?)", [text]).fetchall()[0][0]
        tree = json.loads(ser)
        if tree.get("error"):
            if re.match(r"(?is)^\s*(describe|show|summarize)\s+[a-z_][a-z0-9_]*\s*;?\s*$", text):
                continue  # DESCRIBE / SHOW / SUMMARIZE of a table by name
            raise QueryError(
                f"refused in a live session: {tree.get('error_message', 'cannot check the query')}"
            )
        funcs: set[str] = set()
        tables: set[str] = set()
        table_funcs: set[str] = set()
        _ast_names(tree, funcs, tables, table_funcs)
        file_funcs = sorted(f for f in funcs | table_funcs if _FILE_FUNCS.match(f))
        if file_funcs:
            raise QueryError(f"refused: {file_funcs[0]}() reads outside the telemetry; not allowed")
        acting = sorted(f for f in funcs | table_funcs if f in _STATE_FUNCS)
        if acting:
            raise QueryError(f"refused: {acting[0]}() acts on the database; telemetry SQL only reads")
        other = sorted(table_funcs - _SAFE_TABLE_FUNCS)
        if other:
            raise QueryError(
                f"refused in a live session: table function {other[0]}(); query the telemetry tables "
                "(or range, unnest, duckdb_tables(), …)"
            )
        paths = sorted(t for t in tables if re.search(r"[./\\:~]", t))
        if paths:
            raise QueryError(f"refused: {paths[0]!r} looks like a file path; query the telemetry tables")
    return stmts
