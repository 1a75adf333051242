//! TypeScript to JavaScript: oxc's parser, semantic analysis (scopes, and
//! the early errors the parser leaves to it), the TypeScript transform
//! (types removed; enums, namespaces and parameter properties turned into
//! JavaScript; nothing else lowered) and code generation with a source map.
//!
//! Type checking is not done: a type error is not an error here, as with
//! `tsc --noCheck` or Node's type stripping.

use std::path::{Path, PathBuf};

use oxc_allocator::Allocator;
use oxc_codegen::{Codegen, CodegenOptions, CommentOptions};
use oxc_parser::Parser;
use oxc_semantic::SemanticBuilder;
use oxc_transformer::{TransformOptions, Transformer};

use super::module::{parse_options, source_type};
use super::position::{Insert, Mapping, Shifts, SourceMapped};
use super::{STRICT_WRAP_PREFIX, WRAP_SUFFIX, describe};

/// The file name the source map and the transform see.
const FILE: &str = "program.ts";

/// Turns TypeScript `text` (a function body, module syntax already edited
/// out) into the wrapped script, its insertions and the source map.
///
/// Errors: the message and byte offset in `text` of the first error of the
/// parse, the semantic analysis or the transform.
pub(super) fn transform(
    arena: &Allocator,
    text: &str,
) -> Result<(String, Shifts, SourceMapped), (String, u32)> {
    let first = |diagnostics: &oxc_diagnostics::Diagnostics| {
        diagnostics.errors().next().map(|d| (describe(d), d.labels.first().map_or(0, |l| l.offset())))
    };
    let parsed = Parser::new(arena, text, source_type()).with_options(parse_options()).parse();
    if let Some(e) = first(&parsed.diagnostics) {
        return Err(e);
    }
    let mut program = parsed.program;
    let semantic = SemanticBuilder::new().with_check_syntax_error(true).with_enum_eval(true).build(&program);
    if let Some(e) = first(&semantic.diagnostics) {
        return Err(e);
    }
    let scoping = semantic.semantic.into_scoping();
    let options = TransformOptions::default();
    let transformed =
        Transformer::new(arena, Path::new(FILE), &options).build_with_scoping(scoping, &mut program);
    if let Some(e) = first(&transformed.diagnostics) {
        return Err(e);
    }
    let generated = Codegen::new()
        .with_options(CodegenOptions {
            comments: CommentOptions::disabled(),
            source_map_path: Some(PathBuf::from(FILE)),
            ..CodegenOptions::default()
        })
        .with_source_text(text)
        .build(&program);
    let mut mappings: Vec<Mapping> = generated
        .map
        .as_ref()
        .map(|map| {
            map.get_tokens()
                .map(|t| Mapping {
                    gen_line: t.get_dst_line(),
                    gen_col: t.get_dst_col(),
                    src_line: t.get_src_line(),
                    src_col: t.get_src_col(),
                })
                .collect()
        })
        .unwrap_or_default();
    mappings.sort_unstable();
    let code = generated.code;
    let mut script = String::with_capacity(STRICT_WRAP_PREFIX.len() + code.len() + WRAP_SUFFIX.len());
    script.push_str(STRICT_WRAP_PREFIX);
    script.push_str(&code);
    script.push_str(WRAP_SUFFIX);
    let mut shifts = Shifts::default();
    shifts.push(Insert { line: 1, at: 0, len: STRICT_WRAP_PREFIX.len() as u32 });
    Ok((script, shifts, SourceMapped { generated: code, original: text.to_owned(), mappings }))
}
