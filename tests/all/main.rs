//! Integration tests, one binary (fewer test binaries link faster); one
//! module per area.

mod batch;
mod batch_cli;
mod cli;
mod common;
mod conformance;
mod direct_calls;
mod elicitation;
mod examples;
mod file_race;
mod gate;
mod journal;
mod journal_postgres;
mod limits;
mod mcp_dialects;
mod mcp_engine;
mod mcp_eras;
mod mcp_fixture;
mod mcp_http_faults;
mod mcp_oauth;
mod mcp_servers;
mod mcp_support;
mod mcp_trust;
mod native_tools;
mod programs;
mod programs_typescript;
mod protection;
mod receipts;
mod runs;
mod sandbox;
mod tool_bash;
mod tool_files;
mod tool_search;
mod tool_search_ranking;
mod trust;
mod typescript;
