// The JavaScript every program starts with.
//
// Evaluated once per VM as a function expression: the engine calls it with
// the one host binding, `host(op, a, b)`, and keeps the function it returns
// (`settle`) to finish calls that did not answer at once. Nothing of the
// host is left on globalThis.
//
//   host(0, name, argsJson) -> number   the call is running; settle(id) ends it
//                           -> "{...}"  the call succeeded: the envelope JSON
//                           -> [rest, text]  it succeeded with text content:
//                                        `{metadata, truncated}` JSON + the text
//                           -> "!{...}" the call was refused or failed
//   host(1, level, text)    -> undefined  one console line
(function (host) {
  "use strict";
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const hasOwn = Object.hasOwn;
  const objectProto = Object.prototype;
  const P = Promise;
  const resolved = (v) => P.resolve(v);
  const rejected = (e) => P.reject(e);
  const pending = new Map();

  // A call that was refused, denied, failed, timed out or was cancelled.
  class ToolError extends Error {
    constructor(message, kind, tool, seq) {
      super(message);
      this.kind = kind;
      this.tool = tool;
      this.seq = seq;
    }
  }
  defineProperty(ToolError.prototype, "name", { value: "ToolError", writable: false, configurable: false });
  freeze(ToolError.prototype);
  freeze(ToolError);

  function toolError(payload) {
    const e = parse(payload);
    const where = e.seq === null ? e.tool : `${e.tool} (call ${e.seq})`;
    return new ToolError(`${where}: ${e.message}`, e.kind, e.tool, e.seq);
  }

  // Arguments must be JSON. JSON.stringify alone would drop functions
  // silently, so while tools.call serialises, `toJSON` hooks on
  // Function.prototype and BigInt.prototype throw a TypeError naming the key.
  // Outside that moment the hooks keep JSON.stringify's own behaviour
  // (functions are skipped, BigInts throw). The hooks are fixed properties,
  // so a program cannot remove them. (A per-key replacer function would do
  // the same at a cost on every key of every call.)
  let serialising = null;
  const notJson = (key, what) =>
    new TypeError(
      `tools.call("${serialising}"): arguments must be JSON, but ` +
        (key === "" ? "the arguments are " : `the value at key "${key}" is `) + what
    );
  defineProperty(Function.prototype, "toJSON", {
    value: function (key) {
      if (serialising !== null) throw notJson(String(key), "a function");
      return undefined;
    },
    writable: false, enumerable: false, configurable: false,
  });
  defineProperty(BigInt.prototype, "toJSON", {
    value: function (key) {
      if (serialising !== null) throw notJson(String(key), "a BigInt (pass it as a string or a number)");
      throw new TypeError("BigInt value can't be serialized in JSON");
    },
    writable: false, enumerable: false, configurable: false,
  });

  function argumentsJson(name, args) {
    if (args === undefined) return "{}";
    let text;
    serialising = name;
    try {
      text = stringify(args);
    } catch (e) {
      if (e instanceof TypeError && e.message.startsWith("tools.call(")) throw e;
      throw new TypeError(`tools.call("${name}"): arguments must be JSON: ${e && e.message}`);
    } finally {
      serialising = null;
    }
    if (text === undefined) {
      throw new TypeError(`tools.call("${name}"): arguments must be JSON, but the arguments are a ${typeof args}`);
    }
    return text;
  }

  function call(name, args) {
    if (typeof name !== "string") {
      return rejected(new TypeError("tools.call(name, args): name must be a string"));
    }
    let json;
    try {
      json = argumentsJson(name, args);
    } catch (e) {
      return rejected(e);
    }
    const r = host(0, name, json);
    if (typeof r === "number") {
      return new P((resolve, reject) => pending.set(r, [resolve, reject]));
    }
    if (typeof r === "object") return resolved(textEnvelope(r[0], r[1]));
    if (r.charCodeAt(0) === 33 /* ! */) return rejected(toolError(r.slice(1)));
    return resolved(parse(r));
  }

  // A text result arrives as the string itself plus `{metadata, truncated}`
  // JSON, so a large text is never escaped and parsed again.
  function textEnvelope(rest, text) {
    const m = parse(rest);
    return { content: text, metadata: m.metadata, truncated: m.truncated };
  }

  function settle(id, ok, payload, text) {
    const p = pending.get(id);
    if (p === undefined) return;
    pending.delete(id);
    if (!ok) p[1](toolError(payload));
    else if (text === undefined) p[0](parse(payload));
    else p[0](textEnvelope(payload, text));
  }

  function search(query, options) {
    return call("tool_search", Object.assign({}, options, { query }));
  }

  // `tools.read({path})` is `tools.call("read", {path})`. Names of
  // Object.prototype and promise/JSON hooks are not tool names, so logging
  // or awaiting `tools` makes no call.
  const base = freeze({ call, search });
  const sugar = new Map();
  const tools = new Proxy(base, {
    get(target, key) {
      if (typeof key !== "string") return undefined;
      if (hasOwn(target, key)) return target[key];
      if (key === "then" || key === "toJSON") return undefined;
      if (key in objectProto) return objectProto[key];
      let f = sugar.get(key);
      if (f === undefined) {
        f = (args) => call(key, args);
        sugar.set(key, f);
      }
      return f;
    },
    set() { return false; },
    defineProperty() { return false; },
    deleteProperty() { return false; },
    setPrototypeOf() { return false; },
  });

  function format(v) {
    switch (typeof v) {
      case "string": return v;
      case "undefined": return "undefined";
      case "function": return `[Function ${v.name || "anonymous"}]`;
      case "bigint": return `${v}n`;
      case "symbol": return v.toString();
      case "object":
        if (v === null) return "null";
        if (v instanceof Error) return v.stack ? `${v.name}: ${v.message}\n${v.stack}`.trimEnd() : `${v.name}: ${v.message}`;
        try {
          const s = stringify(v);
          return s === undefined ? String(v) : s;
        } catch (_) {
          return String(v);
        }
      default: return String(v);
    }
  }

  const consoleObject = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    consoleObject[level] = function (...args) {
      host(1, level, args.map(format).join(" "));
    };
  }
  freeze(consoleObject);

  const fixed = (value) => ({ value, writable: false, enumerable: false, configurable: false });
  defineProperty(globalThis, "tools", fixed(tools));
  defineProperty(globalThis, "ToolError", fixed(ToolError));
  defineProperty(globalThis, "console", fixed(consoleObject));
  return settle;
})
