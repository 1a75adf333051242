// The JavaScript every program starts with.
//
// Loaded once per VM (from bytecode) as a function: the engine calls it with
// the one host binding, `host(op, a, b)`, and keeps the three functions it
// returns: `settle`, which ends calls that did not answer at once,
// `finish`, which turns the program's promise into a plain report, and
// `installDate`, which wraps QuickJS's Date once the host has made it.
// Nothing of the host is left on globalThis.
//
//   host(0, name, argsJson) -> number        the call is running; settle(id, answer) ends it
//                           -> answer        it ended at once
//   host(0, name, args)     -> as above, when the host could write the
//                              arguments' JSON without running any code
//                           -> undefined     it could not: serialise them
//   where an answer is
//     "..."              it succeeded with JSON content, no metadata and
//                        nothing cut: the content's JSON
//     [envelope, true]   it succeeded otherwise: the envelope's JSON
//     [rest, text]       it succeeded with text content:
//                        `{metadata, truncated}` JSON + the text
//     [error]            it was refused or failed: error JSON
//   host(1, level, text)    -> undefined     one console line
//   host(2, "now", "")      -> number        the clock, ms since the epoch (journaled)
//   host(2, "seed", "")     -> "a,b,c,d"     Math.random's seed (journaled)
//
// Text goes to the host as it is (the tool name, a console line, the
// report's strings): the host replaces lone surrogates with U+FFFD, as
// String.prototype.toWellFormed would. The
// arrays of answers have their elements as own properties (the host defines
// them), so a setter or getter on Array.prototype does not reach them.
//
// Every built-in the prelude uses is captured here, before any program runs,
// so a program that replaces `Map.prototype.set`, `Promise.resolve`,
// `String.prototype.slice` or a global constructor cannot break tools.call
// or the receipt; only values the prelude creates itself (null-prototype
// objects, arrays the host made) are read after that.
(function (host) {
  "use strict";
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const { freeze, defineProperty, create, hasOwn } = Object;
  const apply = Reflect.apply;
  const objectProto = Object.prototype;
  const P = Promise;
  const promiseThen = P.prototype.then;
  const resolved = P.resolve.bind(P);
  const rejected = P.reject.bind(P);
  const TypeErr = TypeError;
  const Err = Error;
  // QuickJS's own errors: "out of memory" is one (and `null`, when even
  // that cannot be made).
  const internalErrorProto = InternalError.prototype;
  const protoOf = Object.getPrototypeOf;
  const Str = String;
  const repeat = String.prototype.repeat;
  const pending = create(null); // call id -> [resolve, reject]
  const sugar = create(null); // tool name -> (args) => call(name, args)

  // Stack-trace hooks would hand a program the prelude's own functions
  // (CallSite.getFunction), so they are switched off for good.
  defineProperty(Err, "prepareStackTrace", { value: undefined, writable: false, configurable: false });

  // A call that was refused, denied, failed, timed out or was cancelled.
  class ToolError extends Err {
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
    return new ToolError(where === "" ? e.message : `${where}: ${e.message}`, e.kind, e.tool, e.seq);
  }

  // Arguments must be JSON. JSON.stringify alone would drop functions
  // silently, so while tools.call serialises, `toJSON` hooks on
  // Function.prototype and BigInt.prototype throw a TypeError naming the key.
  // Outside that moment the hooks keep JSON.stringify's own behaviour
  // (functions are skipped, BigInts throw). The hooks are fixed properties,
  // so a program cannot remove them. (A per-key replacer function would do
  // the same at a cost on every key of every call.)
  let serialising = null;
  // The last error the hooks threw: argumentsJson passes it on as it is.
  let notJsonError = null;
  const notJson = (key, what) => {
    notJsonError = new TypeErr(
      `tools.call("${serialising}"): arguments must be JSON, but ` +
        (key === "" ? "the arguments are " : `the value at key "${key}" is `) + what
    );
    return notJsonError;
  };
  defineProperty(Function.prototype, "toJSON", {
    value: function (key) {
      if (serialising !== null) throw notJson(Str(key), "a function");
      return undefined;
    },
    writable: false, enumerable: false, configurable: false,
  });
  defineProperty(BigInt.prototype, "toJSON", {
    value: function (key) {
      if (serialising !== null) throw notJson(Str(key), "a BigInt (pass it as a string or a number)");
      throw new TypeErr("BigInt value can't be serialized in JSON");
    },
    writable: false, enumerable: false, configurable: false,
  });

  function argumentsJson(name, args) {
    if (args === undefined) return "{}";
    let text;
    const outer = serialising;
    serialising = name;
    try {
      text = stringify(args);
    } catch (e) {
      // Out of memory stays out of memory: not a fault of the arguments.
      if (e === notJsonError || e === null) throw e;
      if (typeof e === "object" && protoOf(e) === internalErrorProto) throw e;
      throw new TypeErr(`tools.call("${name}"): arguments must be JSON: ${messageOf(e)}`);
    } finally {
      serialising = outer;
    }
    if (text === undefined) {
      throw new TypeErr(`tools.call("${name}"): arguments must be JSON, but the arguments are a ${typeof args}`);
    }
    return text;
  }

  // QuickJS frees a size class's 4 KiB arena as soon as its last block is
  // freed. The scratch buffer of each string JSON.parse reads is of a class
  // nothing else in a VM keeps, so every key of every result made and freed
  // an arena (7% of a call's instructions, docs/PERFORMANCE.md). A string
  // of that class, made at the first call and kept, keeps an arena of it
  // with room: two are made and the first let go, so the kept one's arena
  // has a free block even when the first filled the arena it went to.
  // (Tuned to the vendored QuickJS: a 48-character buffer and a
  // 52-character string fall in one class.)
  let keptArena = null;

  function call(name, args) {
    if (typeof name !== "string") {
      return rejected(new TypeErr("tools.call(name, args): name must be a string"));
    }
    if (keptArena === null) {
      let first = apply(repeat, "-", [52]);
      keptArena = apply(repeat, "-", [52]);
      first = null;
    }
    // Plain arguments go as they are: the host writes their JSON when
    // that runs no code, and answers `undefined` for anything else (a
    // getter, a proxy, a toJSON, what is not JSON), serialised here.
    let r = typeof args === "object" && args !== null ? host(0, name, args) : undefined;
    if (r === undefined) {
      let json;
      try {
        json = argumentsJson(name, args);
      } catch (e) {
        return rejected(e);
      }
      r = host(0, name, json);
    }
    if (typeof r === "number") {
      return new P((resolve, reject) => {
        pending[r] = [resolve, reject];
      });
    }
    if (typeof r !== "string" && r.length === 1) return rejected(toolError(r[0]));
    return resolved(envelopeOf(r));
  }

  // The envelope a call that succeeded resolves to, from its answer. A text
  // result arrives as the string itself plus `{metadata, truncated}` JSON,
  // so a large text is never escaped and parsed again.
  function envelopeOf(r) {
    if (typeof r === "string") return { content: parse(r), metadata: null, truncated: null };
    if (r[1] === true) return parse(r[0]);
    const m = parse(r[0]);
    return { content: r[1], metadata: m.metadata, truncated: m.truncated };
  }

  function settle(id, r) {
    const p = pending[id];
    if (p === undefined) return;
    delete pending[id];
    if (typeof r !== "string" && r.length === 1) p[1](toolError(r[0]));
    else p[0](envelopeOf(r));
  }

  // `tools.read({path})` is `tools.call("read", {path})`. Names of
  // Object.prototype and promise/JSON hooks are not tool names, so logging
  // or awaiting `tools` makes no call.
  // `tools.search(query, options)` is `tools.call("tool_search", {query,
  // ...options})`: it describes matching tools and activates nothing. (A
  // tool named `search` is still reachable with tools.call("search", ...).)
  // `tools.search({query, mode, limit})` too, the form every other call
  // takes.
  function search(query, options) {
    if (query !== null && typeof query === "object" && options === undefined) {
      const given = query;
      query = hasOwn(given, "query") ? given.query : undefined;
      options = create(null);
      for (const key in given) {
        if (key !== "query") options[key] = given[key];
      }
    }
    const args = create(null);
    args.query = query;
    if (options !== undefined && options !== null) {
      if (typeof options !== "object") {
        return rejected(new TypeErr('tools.search(query, options): options must be an object such as {mode: "regex", limit: 5}'));
      }
      for (const key in options) {
        if (key !== "mode" && key !== "limit") {
          return rejected(new TypeErr(`tools.search(query, options): unknown option "${key}"; the options are mode ("bm25" or "regex") and limit (tools.search("a query", {limit: 5}) or tools.search({query: "a query", limit: 5}))`));
        }
      }
      if (hasOwn(options, "mode")) args.mode = options.mode;
      if (hasOwn(options, "limit")) args.limit = options.limit;
    }
    return call("tool_search", args);
  }
  // `tools` is a frozen plain object holding `call` and `search`, whose
  // prototype is a proxy that makes `tools.<name>`: `tools.call` is an
  // ordinary property read, and only sugar goes through the proxy.
  const refuse = () => false;
  const sugarProxy = new Proxy(create(objectProto), {
    get(target, key) {
      if (typeof key !== "string") return undefined;
      if (key === "then" || key === "toJSON") return undefined;
      if (key in objectProto) return objectProto[key];
      let f = sugar[key];
      if (f === undefined) {
        f = (args) => call(key, args);
        sugar[key] = f;
      }
      return f;
    },
    set: refuse,
    defineProperty: refuse,
    deleteProperty: refuse,
    setPrototypeOf: refuse,
  });
  const tools = freeze(create(sugarProxy, {
    call: { value: call, enumerable: true },
    search: { value: search, enumerable: true },
  }));

  function messageOf(e) {
    try {
      if (e !== null && typeof e === "object") {
        const m = e.message;
        if (typeof m === "string") return m;
      }
      return Str(e);
    } catch (_) {
      return "(an error that cannot be described)";
    }
  }

  function format(v) {
    switch (typeof v) {
      case "string": return v;
      case "undefined": return "undefined";
      case "function": return `[Function ${v.name || "anonymous"}]`;
      case "bigint": return `${v}n`;
      case "symbol": return Str(v);
      case "object":
        if (v === null) return "null";
        if (v instanceof Err) {
          const head = `${v.name}: ${v.message}`;
          return typeof v.stack === "string" && v.stack !== "" ? `${head}\n${v.stack}`.trimEnd() : head;
        }
        try {
          const s = stringify(v);
          return s === undefined ? Str(v) : s;
        } catch (_) {
          return Str(v);
        }
      default: return Str(v);
    }
  }

  const consoleObject = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    consoleObject[level] = function (...args) {
      let text = "";
      for (let i = 0; i < args.length; i++) {
        let part;
        try {
          part = format(args[i]);
        } catch (_) {
          part = "(a value that cannot be formatted)";
        }
        text += (i === 0 ? "" : " ") + part;
      }
      host(1, level, text);
    };
  }
  freeze(consoleObject);

  // The program's outcome as a plain report, made while the program is still
  // running (its toJSON methods and getters run under the deadline, and calls
  // they make are the program's calls):
  //   {json}           it returned; the value's JSON text, or null
  //   {failed}         it returned a value that is not JSON
  //   {name, message, stack, thrown}  it threw; `thrown` is "null" when the
  //                    thrown value was null (what QuickJS throws when it
  //                    cannot even allocate the out-of-memory error)
  function returned(value) {
    const r = create(null);
    try {
      const json = stringify(value);
      r.json = json === undefined ? null : json;
    } catch (e) {
      r.failed = `TypeError: the program's return value is not JSON: ${messageOf(e)}`;
    }
    return r;
  }

  function threw(e) {
    const r = create(null);
    if (e === null) {
      r.thrown = "null";
      return r;
    }
    const t = typeof e;
    if (t !== "object" && t !== "function") {
      r.message = `uncaught ${t === "string" ? stringify(e) : Str(e)}`;
      return r;
    }
    let name, message, stack;
    try { name = e.name; } catch (_) {}
    try { message = e.message; } catch (_) {}
    try { stack = e.stack; } catch (_) {}
    if (typeof name === "string") r.name = name;
    if (typeof message === "string") r.message = message;
    if (typeof stack === "string") r.stack = stack;
    // A ToolError the prelude made: its tool says where the program called
    // it when no frame of the program was on the stack (a call that ended
    // later).
    if (protoOf(e) === ToolError.prototype) {
      let tool;
      try { tool = e.tool; } catch (_) {}
      if (typeof tool === "string") r.tool = tool;
    }
    if (r.name === undefined && r.message === undefined) {
      let shown;
      try { shown = stringify(e); } catch (_) {}
      r.message = `uncaught ${shown === undefined ? Str(typeof e) : shown}`;
    }
    return r;
  }

  // A program whose value is a function (`export default async () => {...}`,
  // a trailing `main`, `return run`) gave its entry point: the value is
  // what calling it, with no arguments, resolves to. One level only.
  function entered(value) {
    return typeof value === "function" ? value() : value;
  }

  function finish(program) {
    return apply(promiseThen, apply(promiseThen, program, [entered]), [returned, threw]);
  }

  // The VM's two sources of values that differ from run to run, the clock
  // and Math.random, come from the host, which journals them, so a resumed
  // run replays the values the program saw before its pause
  // (docs/JOURNAL.md). `Date` keeps its prototype, statics and behaviour;
  // only "now" (new Date(), Date(), Date.now()) asks the host. QuickJS's
  // Date is made on the program's first use of the global (the host's
  // accessor), which then calls `installDate` before handing it over.
  const construct = Reflect.construct;
  // The global object itself (a program may rebind `globalThis`).
  const global = globalThis;
  // It runs while the program runs: its property descriptors have no
  // prototype, so nothing the program put on Object.prototype is read.
  function installDate() {
    const RealDate = global.Date;
    const dateToString = RealDate.prototype.toString;
    // A method, as Date.now is: not a constructor, no `prototype`.
    const { now } = { now() { return host(2, "now", ""); } };
    const DateShim = function Date(...args) {
      if (new.target === undefined) return apply(dateToString, construct(RealDate, [now()]), []);
      return construct(RealDate, args.length === 0 ? [now()] : args, new.target);
    };
    defineProperty(DateShim, "length", { __proto__: null, value: 7, configurable: true });
    defineProperty(DateShim, "prototype", { __proto__: null, value: RealDate.prototype, writable: false, configurable: false });
    defineProperty(DateShim, "now", { __proto__: null, value: now, writable: true, configurable: true });
    defineProperty(DateShim, "parse", { __proto__: null, value: RealDate.parse, writable: true, configurable: true });
    defineProperty(DateShim, "UTC", { __proto__: null, value: RealDate.UTC, writable: true, configurable: true });
    defineProperty(RealDate.prototype, "constructor", { __proto__: null, value: DateShim, writable: true, configurable: true });
    defineProperty(global, "Date", { __proto__: null, value: DateShim, writable: true, configurable: true });
  }

  // Math.random: xoshiro128** over a journaled seed; 53 random bits from
  // two 32-bit outputs.
  const imul = Math.imul;
  const toNumber = Number;
  const splitText = String.prototype.split;
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0, seeded = false;
  defineProperty(Math, "random", {
    // A method, as Math.random is: not a constructor, no `prototype`.
    value: { random() {
      if (!seeded) {
        const parts = apply(splitText, host(2, "seed", ""), [","]);
        s0 = toNumber(parts[0]) | 0; s1 = toNumber(parts[1]) | 0;
        s2 = toNumber(parts[2]) | 0; s3 = toNumber(parts[3]) | 0;
        seeded = true;
      }
      // Two xoshiro128** steps: 27 high bits, then 26 low bits.
      let high = 0;
      for (let step = 0; step < 2; step++) {
        const r = imul(((imul(s1, 5) << 7) | (imul(s1, 5) >>> 25)), 9) >>> 0;
        const t = s1 << 9;
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t;
        s3 = (s3 << 11) | (s3 >>> 21);
        if (step === 0) high = r >>> 5;
        else return (high * 67108864 + (r >>> 6)) / 9007199254740992;
      }
    } }.random,
    writable: true,
    configurable: true,
  });

  // A program's `input` (a batch line's, `--input`): the host sets it
  // when there is one; without, it is there and undefined, so
  // `input ?? fallback` works.
  defineProperty(globalThis, "input", { value: undefined, writable: true, configurable: true });

  // Fixed: not writable, enumerable or configurable (the defaults).
  defineProperty(globalThis, "tools", { value: tools });
  defineProperty(globalThis, "ToolError", { value: ToolError });
  defineProperty(globalThis, "console", { value: consoleObject });
  return [settle, finish, installDate];
})
