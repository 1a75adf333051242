//! A call's arguments as JSON text, written straight from the VM's values
//! when that can run no program code.
//!
//! `JSON.stringify` was about a quarter of a call that answers at once (a
//! wrapper object, a property list and a stack array per call, and a
//! `toJSON` lookup on every object). For arguments made only of plain
//! objects, arrays with no holes, strings, numbers, booleans and `null`,
//! whose properties are all data properties and with no `toJSON` anywhere
//! on their prototype chains, `JSON.stringify` runs no program code, and
//! [`write`] produces the same text, byte for byte, reading the values
//! without running any code either. Anything else (a getter, a proxy, a
//! `toJSON`, a function, a BigInt, a lone surrogate, a hole, a class
//! instance, nesting deeper than [`MAX_DEPTH`]) gives `None` before any
//! code could have run, and the prelude's `JSON.stringify` path, with its
//! messages for what is not JSON, serialises the arguments instead: a
//! getter runs once either way.

use std::ffi::c_int;

use rquickjs::{Ctx, Value, qjs};

/// QuickJS's class ids of ordinary objects and arrays (`JS_CLASS_OBJECT`,
/// `JS_CLASS_ARRAY`, internal to quickjs.c; a unit test checks them).
const CLASS_OBJECT: u32 = 1;
const CLASS_ARRAY: u32 = 2;

/// Nesting this deep is left to `JSON.stringify` (which also reports a
/// cycle).
pub(crate) const MAX_DEPTH: usize = 64;

/// Prototype chains longer than this are left to `JSON.stringify`.
const MAX_CHAIN: usize = 8;

/// Text longer than this is left to `JSON.stringify`, in bytes: the host's
/// text is outside the VM's memory limit and its writing outside the
/// deadline's checks, and arguments that share an array many times over
/// can stand for far more text than their size in the VM; inside the VM
/// that runs out of memory, or is interrupted, as the program's error.
pub(crate) const MAX_TEXT: usize = 1 << 20;

/// Values visited beyond this are left to `JSON.stringify`: properties
/// whose value is `undefined` are read but write nothing, so the text
/// alone does not bound the host's work.
pub(crate) const MAX_VISITS: usize = 1 << 18;

/// What a walk carries: the `toJSON` atom, and how many values it visited.
struct Walk {
    to_json: qjs::JSAtom,
    visits: usize,
}

/// `JSON.stringify(value)`'s text, when producing it can run no program
/// code; `None` otherwise (nothing was run or changed).
pub(crate) fn write(ctx: &Ctx<'_>, value: &Value<'_>) -> Option<String> {
    let raw = ctx.as_raw().as_ptr();
    let mut out = String::with_capacity(64);
    // SAFETY: `raw` is this live context, on its thread; `value` is a live
    // value of it. Every QuickJS function used below reads ordinary
    // objects and arrays only (their classes are checked first), which
    // runs no JavaScript, and every reference it hands out is freed.
    #[allow(unsafe_code)]
    let written = unsafe {
        let to_json = qjs::JS_NewAtomLen(raw, c"toJSON".as_ptr(), 6);
        let written =
            write_value(raw, value.as_raw(), 0, &mut Walk { to_json, visits: 0 }, &mut out, Place::Top);
        qjs::JS_FreeAtom(raw, to_json);
        written
    };
    written.map(|()| out)
}

/// Where a value is: what `JSON.stringify` makes of `undefined` there.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The arguments themselves (undefined: no text).
    Top,
    /// A property's value (undefined: the property is left out).
    Property,
    /// An array's element (undefined: `null`).
    Element,
}

/// What writing a value came to.
enum Wrote {
    Text,
    /// A property to leave out (undefined, or a symbol).
    Nothing,
}

/// Writes `v`.
///
/// # Safety
/// `ctx` is a live context on its thread and `v` a live value of it.
#[allow(unsafe_code)]
unsafe fn write_value(
    ctx: *mut qjs::JSContext,
    v: qjs::JSValue,
    depth: usize,
    walk: &mut Walk,
    out: &mut String,
    place: Place,
) -> Option<()> {
    // SAFETY: per the function's contract.
    match unsafe { write_any(ctx, v, depth, walk, out, place) }? {
        Wrote::Text => Some(()),
        Wrote::Nothing => None,
    }
}

/// # Safety
/// As [`write_value`].
#[allow(unsafe_code)]
unsafe fn write_any(
    ctx: *mut qjs::JSContext,
    v: qjs::JSValue,
    depth: usize,
    walk: &mut Walk,
    out: &mut String,
    place: Place,
) -> Option<Wrote> {
    walk.visits += 1;
    if out.len() > MAX_TEXT || walk.visits > MAX_VISITS {
        return None;
    }
    // SAFETY: per the function's contract; the tag says which accessor of
    // the value is valid.
    unsafe {
        match qjs::JS_VALUE_GET_TAG(v) {
            qjs::JS_TAG_INT => {
                out.push_str(itoa::Buffer::new().format(qjs::JS_VALUE_GET_INT(v)));
            }
            qjs::JS_TAG_BOOL => out.push_str(if qjs::JS_VALUE_GET_BOOL(v) { "true" } else { "false" }),
            qjs::JS_TAG_NULL => out.push_str("null"),
            qjs::JS_TAG_FLOAT64 => write_number(ctx, v, out)?,
            qjs::JS_TAG_STRING | qjs::JS_TAG_STRING_ROPE => write_string(ctx, v, out)?,
            qjs::JS_TAG_UNDEFINED | qjs::JS_TAG_SYMBOL => match place {
                Place::Top => return None,
                Place::Property => return Some(Wrote::Nothing),
                Place::Element => out.push_str("null"),
            },
            qjs::JS_TAG_OBJECT => {
                if depth >= MAX_DEPTH || !plain_chain(ctx, v, walk.to_json) {
                    return None;
                }
                match qjs::JS_GetClassID(v) {
                    CLASS_OBJECT => write_object(ctx, v, depth, walk, out)?,
                    CLASS_ARRAY => write_array(ctx, v, depth, walk, out)?,
                    _ => return None,
                }
            }
            // BigInts (whose toJSON the prelude hooks), and anything else.
            _ => return None,
        }
    }
    Some(Wrote::Text)
}

/// Whether `obj` and each object on its prototype chain is an ordinary
/// object or array without an own `toJSON` (so `JSON.stringify` would
/// find none, and reading them runs no code).
///
/// # Safety
/// As [`write_value`]; `obj` is an object.
#[allow(unsafe_code)]
unsafe fn plain_chain(ctx: *mut qjs::JSContext, obj: qjs::JSValue, to_json: qjs::JSAtom) -> bool {
    // SAFETY: per the function's contract; each prototype read is of an
    // ordinary object (checked first), which runs no code, and is freed.
    unsafe {
        let mut current = qjs::JS_DupValue(ctx, obj);
        for _ in 0..MAX_CHAIN {
            let plain = matches!(qjs::JS_GetClassID(current), CLASS_OBJECT | CLASS_ARRAY)
                && match own_property(ctx, current, to_json) {
                    None => true,
                    Some((_, found)) => {
                        if let Some(value) = found {
                            qjs::JS_FreeValue(ctx, value);
                        }
                        false
                    }
                };
            if !plain {
                qjs::JS_FreeValue(ctx, current);
                return false;
            }
            let next = qjs::JS_GetPrototype(ctx, current);
            qjs::JS_FreeValue(ctx, current);
            match qjs::JS_VALUE_GET_TAG(next) {
                qjs::JS_TAG_NULL => return true,
                qjs::JS_TAG_OBJECT => current = next,
                _ => {
                    qjs::JS_FreeValue(ctx, next);
                    return false;
                }
            }
        }
        qjs::JS_FreeValue(ctx, current);
        false
    }
}

/// `obj`'s own property `atom`, if it has one: its flags (`JS_PROP_*`) and,
/// for a data property, its value (one reference, which the caller frees);
/// `None` as the value for an accessor.
///
/// # Safety
/// As [`write_value`]; `obj` is an ordinary object or array (reading its
/// own property runs no code).
#[allow(unsafe_code)]
pub(super) unsafe fn own_property(
    ctx: *mut qjs::JSContext,
    obj: qjs::JSValue,
    atom: qjs::JSAtom,
) -> Option<(c_int, Option<qjs::JSValue>)> {
    let mut desc = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
    // SAFETY: per the function's contract; a found descriptor holds one
    // reference in each of its values, each freed or handed out here.
    unsafe {
        if qjs::JS_GetOwnProperty(ctx, desc.as_mut_ptr(), obj, atom) != 1 {
            return None;
        }
        let desc = desc.assume_init();
        qjs::JS_FreeValue(ctx, desc.getter);
        qjs::JS_FreeValue(ctx, desc.setter);
        if desc.flags & (qjs::JS_PROP_GETSET as c_int) != 0 {
            qjs::JS_FreeValue(ctx, desc.value);
            return Some((desc.flags, None));
        }
        Some((desc.flags, Some(desc.value)))
    }
}

/// Writes a plain object: its own enumerable string-keyed properties, in
/// QuickJS's order (the order `JSON.stringify` uses), each a data
/// property.
///
/// # Safety
/// As [`write_value`]; `obj` is an ordinary object.
#[allow(unsafe_code)]
unsafe fn write_object(
    ctx: *mut qjs::JSContext,
    obj: qjs::JSValue,
    depth: usize,
    walk: &mut Walk,
    out: &mut String,
) -> Option<()> {
    let mut tab: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
    let mut len: u32 = 0;
    let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as c_int;
    // SAFETY: per the function's contract; the table QuickJS returns has
    // `len` entries and is freed (with its atoms) before returning.
    unsafe {
        if qjs::JS_GetOwnPropertyNames(ctx, &mut tab, &mut len, obj, flags) < 0 {
            let _ = qjs::JS_GetException(ctx);
            return None;
        }
        let entries = std::slice::from_raw_parts(tab, len as usize);
        let written = (|| {
            out.push('{');
            let mut first = true;
            for entry in entries {
                let value = match own_property(ctx, obj, entry.atom) {
                    Some((_, Some(value))) => value,
                    // An accessor (or a property gone meanwhile, which
                    // cannot happen without code running).
                    _ => return None,
                };
                let mark = out.len();
                if !first {
                    out.push(',');
                }
                let key_ok = write_atom(ctx, entry.atom, out);
                out.push(':');
                let wrote = if key_ok.is_some() {
                    write_any(ctx, value, depth + 1, walk, out, Place::Property)
                } else {
                    None
                };
                qjs::JS_FreeValue(ctx, value);
                match wrote? {
                    Wrote::Text => first = false,
                    Wrote::Nothing => out.truncate(mark),
                }
            }
            out.push('}');
            Some(())
        })();
        qjs::JS_FreePropertyEnum(ctx, tab, len);
        written
    }
}

/// Writes an array whose elements 0..length are all own data properties.
///
/// # Safety
/// As [`write_value`]; `arr` is an ordinary array.
#[allow(unsafe_code)]
unsafe fn write_array(
    ctx: *mut qjs::JSContext,
    arr: qjs::JSValue,
    depth: usize,
    walk: &mut Walk,
    out: &mut String,
) -> Option<()> {
    // SAFETY: per the function's contract; an array's `length` is an own
    // data property, and each element is read as an own property (a hole
    // would be read through the prototype chain, so it is left to
    // JSON.stringify).
    unsafe {
        let mut len: i64 = 0;
        if qjs::JS_GetLength(ctx, arr, &mut len) < 0 {
            let _ = qjs::JS_GetException(ctx);
            return None;
        }
        out.push('[');
        for i in 0..len {
            let atom = qjs::JS_NewAtomUInt32(ctx, u32::try_from(i).ok()?);
            let element = own_property(ctx, arr, atom);
            qjs::JS_FreeAtom(ctx, atom);
            let Some((_, Some(value))) = element else { return None };
            if i > 0 {
                out.push(',');
            }
            let wrote = write_value(ctx, value, depth + 1, walk, out, Place::Element);
            qjs::JS_FreeValue(ctx, value);
            wrote?;
        }
        out.push(']');
        Some(())
    }
}

/// Writes a number that is not an int32 as `JSON.stringify` does: `null`
/// when not finite, else JavaScript's own `Number.prototype.toString`
/// text (QuickJS's, on a number primitive: no code runs).
///
/// # Safety
/// As [`write_value`]; `v` is a float64.
#[allow(unsafe_code)]
unsafe fn write_number(ctx: *mut qjs::JSContext, v: qjs::JSValue, out: &mut String) -> Option<()> {
    // SAFETY: per the function's contract.
    unsafe {
        let x = qjs::JS_VALUE_GET_FLOAT64(v);
        if !x.is_finite() {
            out.push_str("null");
            return Some(());
        }
        if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
            // -0 is "0", as in JavaScript.
            out.push_str(itoa::Buffer::new().format(x as i64));
            return Some(());
        }
        let text = qjs::JS_ToString(ctx, v);
        let written = write_text(ctx, text, out, false);
        qjs::JS_FreeValue(ctx, text);
        written
    }
}

/// Writes a string as a JSON string; `None` for a string with a lone
/// surrogate (JSON.stringify escapes those as `\udXXX`).
///
/// # Safety
/// As [`write_value`]; `v` is a string.
#[allow(unsafe_code)]
unsafe fn write_string(ctx: *mut qjs::JSContext, v: qjs::JSValue, out: &mut String) -> Option<()> {
    // SAFETY: per the function's contract.
    unsafe { write_text(ctx, v, out, true) }
}

/// Writes the property key `atom` as a JSON string.
///
/// # Safety
/// As [`write_value`]; `atom` is a live atom of `ctx`.
#[allow(unsafe_code)]
unsafe fn write_atom(ctx: *mut qjs::JSContext, atom: qjs::JSAtom, out: &mut String) -> Option<()> {
    // SAFETY: per the function's contract; the C string is freed here.
    unsafe {
        let mut len = 0;
        let ptr = qjs::JS_AtomToCStringLen(ctx, &mut len, atom);
        if ptr.is_null() {
            let _ = qjs::JS_GetException(ctx);
            return None;
        }
        let bytes = std::slice::from_raw_parts(ptr.cast::<u8>(), len as usize);
        let written = std::str::from_utf8(bytes).ok().map(|s| quote(s, out));
        qjs::JS_FreeCString(ctx, ptr);
        written
    }
}

/// Writes string value `v`'s text, quoted as a JSON string or as it is.
///
/// # Safety
/// As [`write_value`]; `v` is a string (or the exception of a failed
/// conversion, which gives `None`).
#[allow(unsafe_code)]
unsafe fn write_text(
    ctx: *mut qjs::JSContext,
    v: qjs::JSValue,
    out: &mut String,
    quoted: bool,
) -> Option<()> {
    // SAFETY: per the function's contract; the C string is freed here.
    unsafe {
        if qjs::JS_VALUE_GET_TAG(v) == qjs::JS_TAG_EXCEPTION {
            let _ = qjs::JS_GetException(ctx);
            return None;
        }
        let mut len = 0usize;
        let ptr = qjs::JS_ToCStringLen(ctx, &mut len, v);
        if ptr.is_null() {
            let _ = qjs::JS_GetException(ctx);
            return None;
        }
        let bytes = std::slice::from_raw_parts(ptr.cast::<u8>(), len);
        // A lone surrogate comes out as WTF-8, which is not UTF-8.
        let written = std::str::from_utf8(bytes)
            .ok()
            .filter(|s| out.len() + s.len() <= MAX_TEXT)
            .map(|s| if quoted { quote(s, out) } else { out.push_str(s) });
        qjs::JS_FreeCString(ctx, ptr);
        written
    }
}

/// `s` as a JSON string, escaped as `JSON.stringify` escapes a
/// well-formed string (ECMA-262 QuoteJSONString): `"` and `\`, `\b \t \n
/// \f \r`, other characters below U+0020 as `\u00xx` (lower-case hex);
/// everything else as it is.
fn quote(s: &str, out: &mut String) {
    out.push('"');
    let mut plain = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\x08' => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            b'\x0c' => "\\f",
            b'\r' => "\\r",
            0..0x20 => "",
            _ => continue,
        };
        out.push_str(&s[plain..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use rquickjs::{Context, Runtime, Value};

    /// What `write` and `JSON.stringify` make of `source`'s value:
    /// (write's text, stringify's text).
    fn both(source: &str) -> (Option<String>, Option<String>) {
        let rt = Runtime::new().unwrap();
        let ctx = Context::full(&rt).unwrap();
        ctx.with(|ctx| {
            let v: Value = ctx.eval(source).unwrap();
            let fast = super::write(&ctx, &v);
            // A BigInt or a cycle throws; a lone surrogate is escaped.
            let slow = ctx.json_stringify(v).ok().flatten().map(|s| s.to_string().unwrap());
            let _ = ctx.catch();
            (fast, slow)
        })
    }

    #[test]
    fn the_class_ids_are_quickjs_s() {
        let rt = Runtime::new().unwrap();
        let ctx = Context::full(&rt).unwrap();
        ctx.with(|ctx| {
            let o: Value = ctx.eval("({})").unwrap();
            let a: Value = ctx.eval("[]").unwrap();
            #[allow(unsafe_code)]
            // SAFETY: live values of this context.
            unsafe {
                assert_eq!(rquickjs::qjs::JS_GetClassID(o.as_raw()), super::CLASS_OBJECT);
                assert_eq!(rquickjs::qjs::JS_GetClassID(a.as_raw()), super::CLASS_ARRAY);
            }
        });
    }

    #[test]
    fn plain_values_are_written_as_json_stringify_writes_them() {
        for source in [
            "({i: 5})",
            "({a: 1, b: 'two', c: true, d: null, e: [1, 2, [3]], f: {g: {}}})",
            "({s: 'quote \" backslash \\\\ nl \\n tab \\t cr \\r bs \\b ff \\f nul \\0 us \\x1f del \\x7f é 😀 \\u2028'})",
            "({'': 0, '2': 'b', '1': 'a', z: 1, 'x y': 2, '\"k\\\\': 3})",
            "({u: undefined, sym: Symbol('s'), n: -0, f: 1.5, big: 1e21, small: 1e-7, neg: -2147483649, nan: NaN, inf: -Infinity})",
            "[undefined, Symbol(), 1, 'a', null, 0.1 + 0.2, 2 ** 53, -(2 ** 60)]",
            "({r: 'ab'.repeat(3) + 'cd'})",
            "Object.assign(Object.create(null), {a: 1})",
            "(() => { class C { x = 1 } return new C(); })()",
            "(() => { class A extends Array {} const a = new A(); a.push(1); a.extra = 2; return a; })()",
            "Object.setPrototypeOf({a: 1}, [])",
            "'top'",
            "42",
            "null",
            "[]",
            "({})",
        ] {
            let (fast, slow) = both(source);
            assert_eq!(fast, slow, "{source}");
        }
    }

    #[test]
    fn random_plain_values_are_written_as_json_stringify_writes_them() {
        // 2,000 values from a seeded generator: nested objects and arrays,
        // strings of control characters, quotes, escapes and non-ASCII,
        // integers, floats of every size, -0, NaN, undefined.
        let rt = Runtime::new().unwrap();
        let ctx = Context::full(&rt).unwrap();
        ctx.with(|ctx| {
            let values: rquickjs::Array = ctx
                .eval(
                    r#"
                    let seed = 7;
                    const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
                    const chars = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\r', '\b', '\f', '\0', '\x01', '\x1f',
                                   '\x7f', 'é', '€', '😀', '\u2028', '\ufeff', '0', '-'];
                    const str = () => { let s = ''; for (let i = rnd(8); i > 0; i--) s += chars[rnd(chars.length)]; return s; };
                    const nums = [0, -0, 1, -1, 2147483647, -2147483648, 2147483648, 0.5, -1.25, 1e21, 1e-7,
                                  123456789.125, 2 ** 53, 2 ** 53 + 2, -(2 ** 70), 5e-324, 1.7976931348623157e308,
                                  NaN, Infinity, 0.1 + 0.2, 100, 1e20];
                    const val = (d) => {
                        switch (d > 3 ? rnd(4) : rnd(7)) {
                            case 0: return nums[rnd(nums.length)];
                            case 1: return str();
                            case 2: return [true, false, null, undefined][rnd(4)];
                            case 3: return rnd(1000) - 500;
                            case 4: { const a = []; for (let i = rnd(4); i > 0; i--) a.push(val(d + 1)); return a; }
                            default: { const o = {}; for (let i = rnd(5); i > 0; i--) o[rnd(3) ? str() : String(rnd(20))] = val(d + 1); return o; }
                        }
                    };
                    const out = []; for (let i = 0; i < 2000; i++) out.push({v: val(0)}); out
                    "#,
                )
                .unwrap();
            for i in 0..values.len() {
                let v: Value = values.get(i).unwrap();
                let fast = super::write(&ctx, &v);
                let slow = ctx.json_stringify(v).unwrap().map(|s| s.to_string().unwrap());
                assert!(fast.is_some(), "value {i} is plain: {slow:?}");
                assert_eq!(fast, slow, "value {i}");
            }
        });
    }

    #[test]
    fn values_that_could_run_code_or_need_a_message_are_left_to_json_stringify() {
        for source in [
            "({get a() { return 1; }})",
            "({a: {toJSON() { return 1; }}})",
            "(() => { const o = {a: 1}; Object.prototype.toJSON = () => 2; return o; })()",
            "new Proxy({a: 1}, {})",
            "({a: new Proxy({}, {})})",
            "({f() {}})",
            "({b: 1n})",
            "({d: new Date(0)})",
            "({n: new Number(1)})",
            "({s: '\\ud800'})",
            "({'\\udc00': 1})",
            "[1, , 3]",
            "Object.setPrototypeOf({a: 1}, new Proxy({}, {}))",
            "(() => { const a = []; a.push(a); return a; })()",
            "undefined",
        ] {
            let (fast, _) = both(source);
            assert_eq!(fast, None, "{source}");
        }
    }

    #[test]
    fn text_longer_than_the_limit_is_left_to_json_stringify() {
        // One array shared 2^19 times over: 512 Ki leaves (2 MiB of text) in
        // a few hundred bytes of VM memory. The host stops at MAX_TEXT.
        assert!(both("let a = 1; for (let i = 0; i < 19; i++) a = [a, a]; a").0.is_none());
        assert!(both(&format!("'{}'", "x".repeat(super::MAX_TEXT + 1))).0.is_none());
        let (fast, slow) = both(&format!("'{}'", "x".repeat(super::MAX_TEXT - 2)));
        assert!(fast.is_some() && fast == slow, "a text just under the limit is written");
    }

    #[test]
    fn values_past_the_visit_limit_are_left_to_json_stringify() {
        // Undefined properties write nothing but are read: 2,000 of them
        // shared 200 times over is 400,000 reads for 600 bytes of text.
        let source =
            "const o = {}; for (let i = 0; i < 2000; i++) o['k' + i] = undefined; new Array(200).fill(o)";
        assert!(both(source).0.is_none());
        let (fast, slow) =
            both("const o = {}; for (let i = 0; i < 20; i++) o['k' + i] = undefined; new Array(200).fill(o)");
        assert!(fast.is_some() && fast == slow);
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_left_to_json_stringify() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let (fast, slow) = both(&deep(super::MAX_DEPTH));
        assert_eq!(fast, slow);
        assert_eq!(both(&deep(super::MAX_DEPTH + 1)).0, None);
    }
}
