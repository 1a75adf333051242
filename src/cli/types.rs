//! `codemode types`: the TypeScript declarations of the engine's catalog
//! (DESIGN.md §6), on stdout.

use super::engine_args::CatalogArgs;

/// Arguments of `codemode types`.
#[derive(Debug, clap::Args)]
pub(crate) struct TypesArgs {
    /// Only the eager tools (what a model sees from the start), not the
    /// deferred ones.
    #[arg(long)]
    eager: bool,
    /// Leave out the shared preamble (ToolResult, ToolError, tools.call,
    /// `declare const tools`): only the tools' declarations.
    #[arg(long)]
    no_preamble: bool,
    #[command(flatten)]
    catalog: CatalogArgs,
}

/// Runs `codemode types`. Exit 0, or 2 when the engine cannot be built.
pub(crate) fn types(args: TypesArgs) -> anyhow::Result<u8> {
    let engine = args.catalog.engine(None).build()?;
    let specs = engine.usable_tools();
    let chosen = specs.iter().filter(|s| !args.eager || s.loading == codemode::tool::Loading::Eager);
    let options = codemode::tool::DeclarationOptions::new().preamble(!args.no_preamble);
    // Descriptions only reach comments and string literals, where the
    // `\u{..}` escapes `printable` writes are text and a TypeScript escape
    // of the same character: the output stays valid TypeScript.
    let declarations = codemode::tool::declarations_with(chosen, &options);
    super::print_stdout(&super::run::printable(&declarations))?;
    Ok(0)
}
