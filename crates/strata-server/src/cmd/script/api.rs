//! The Lua side of the engine: the `redis` table (call, pcall, error and
//! status replies, sha1hex, log, setresp, register_function ...), the
//! libraries scripts get, and Redis 7's global protection: scripts see
//! the globals through a read-only view, reading a global that does not
//! exist is an error, and the library tables and basic types' metatables
//! cannot be changed.

use mlua::{Lua, Table, Value};

use super::run::handler;

/// Lua code run once on a new state with the full standard library: it
/// builds the `redis` table, hides what scripts may not use and returns
/// the real globals and the read-only view scripts run in.
const PRELUDE: &str = r#"
local hidden, version = ...
local real = _G
local rawget, rawset, setmetatable, getmetatable, error, type, tostring, select, loadstring, xpcall, ipairs =
      rawget, rawset, setmetatable, getmetatable, error, type, tostring, select, loadstring, xpcall, ipairs
local readonly = setmetatable({}, {__mode = 'k'})
local function deny() error('Attempt to modify a readonly table', 2) end
local function guard()
  local g = setmetatable({}, {__newindex = deny, __metatable = false})
  readonly[g] = true
  return g
end
local function view(t)
  local p = setmetatable({}, {__index = t, __newindex = deny, __metatable = guard()})
  readonly[p] = true
  return p
end
local function raise(msg) error({err = msg}, 0) end

local redis = {}
redis.call = function(...)
  local d = hidden.dispatch
  if not d then raise('ERR redis.call/pcall can only be called inside a script invocation') end
  local v, failed = d(true, select('#', ...), {...})
  if failed then error(v, 0) end
  return v
end
redis.pcall = function(...)
  local d = hidden.dispatch
  if not d then raise('ERR redis.call/pcall can only be called inside a script invocation') end
  local v = d(false, select('#', ...), {...})
  return v
end
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then raise('ERR wrong number of arguments') end
  return hidden.sha1((...))
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  local sp = s:find(' ', 1, true)
  local code, msg
  if sp then code, msg = s:sub(2, sp - 1), s:sub(sp + 1) else code, msg = 'ERR', s:sub(2) end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  return {ok = s}
end
redis.log = function(...)
  if select('#', ...) < 2 then raise('ERR redis.log() requires two arguments or more.') end
  local level = ...
  if type(level) ~= 'number' then raise('ERR First argument must be a number (log level).') end
  if level < 0 or level > 3 then raise('ERR Invalid debug level.') end
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.setresp = function(...)
  if select('#', ...) ~= 1 then raise('ERR redis.setresp() requires one argument.') end
  local v = ...
  if v ~= 2 and v ~= 3 then raise('ERR RESP version must be 2 or 3.') end
  hidden.resp = v
end
redis.set_repl = function(...)
  if select('#', ...) ~= 1 then raise('ERR redis.set_repl() requires two arguments.') end
  local f = ...
  if type(f) ~= 'number' or f < 0 or f > 3 then
    raise('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.REDIS_VERSION = version
local major, minor, patch = version:match('^(%d+)%.(%d+)%.(%d+)')
redis.REDIS_VERSION_NUM = (tonumber(major) or 0) * 65536 + (tonumber(minor) or 0) * 256 + (tonumber(patch) or 0)
redis.register_function = function(...)
  local r = hidden.register
  if not r then raise('ERR redis.register_function can only be called on FUNCTION LOAD command') end
  local n = select('#', ...)
  local a, b = ...
  if n == 1 and type(a) == 'table' then
    for k in pairs(a) do
      if k ~= 'function_name' and k ~= 'callback' and k ~= 'flags' and k ~= 'description' then
        raise('ERR unknown argument given to redis.register_function')
      end
    end
    r(a.function_name, a.callback, a.flags, a.description)
  elseif n == 2 then
    r(a, b, nil, nil)
  else
    raise('ERR wrong number of arguments to redis.register_function')
  end
end

real.redis = view(redis)
for _, name in ipairs({'string', 'math', 'table', 'coroutine', 'bit', 'cjson', 'cmsgpack', 'struct'}) do
  if rawget(real, name) then real[name] = view(real[name]) end
end
local smt = getmetatable('')
if smt then smt.__metatable = guard() end
real.setmetatable = function(t, mt)
  if readonly[t] then error('Attempt to modify a readonly table', 2) end
  return setmetatable(t, mt)
end
real.rawset = function(t, k, v)
  if readonly[t] then error('Attempt to modify a readonly table', 2) end
  return rawset(t, k, v)
end
-- Lua 5.1.5's unpack overflows on huge ranges (Redis patches it): refuse
-- more results than the stack takes, with Redis's message.
local unpack_ = unpack
real.unpack = function(...)
  local t, i, j = ...
  if i == nil then i = 1 else i = tonumber(i) end
  if j == nil then j = type(t) == 'table' and #t or 0 else j = tonumber(j) end
  if type(i) == 'number' and type(j) == 'number' and i <= j and j - i >= 7999 then
    error('too many results to unpack', 2)
  end
  return unpack_(...)
end
-- A killed script must stop even inside pcall: its error goes on up.
local pcall_, xpcall_ = pcall, xpcall
local function rethrow(ok, ...)
  if not ok and hidden.killed() then error((...), 0) end
  return ok, ...
end
real.pcall = function(...) return rethrow(pcall_(...)) end
real.xpcall = function(...) return rethrow(xpcall_(...)) end
real.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary code is not allowed' end
  return loadstring(s, name)
end
for _, n in ipairs({'print', 'dofile', 'loadfile', 'setfenv', 'getfenv', 'newproxy', 'module', 'require',
                    'package', 'os', 'io', 'debug'}) do
  real[n] = nil
end
local env = setmetatable({}, {
  __index = function(_, k)
    local v = rawget(real, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = deny,
  __metatable = guard(),
})
readonly[env] = true
real._G = env
hidden.run = function(f, keys, argv)
  return xpcall(function() return f(keys, argv) end, hidden.handler)
end
return real, env
"#;

/// Sets up a new state: the libraries, the `redis` table and the
/// protection; returns the hidden helper table, the real globals and the
/// view scripts run in.
pub(crate) fn setup(lua: &Lua) -> mlua::Result<(Table, Table, Table)> {
    super::libs::install(lua)?;
    let hidden = lua.create_table()?;
    hidden.raw_set("handler", lua.create_function(handler)?)?;
    hidden.raw_set(
        "sha1",
        lua.create_function(|lua, v: Value| {
            let s = lua.coerce_string(v)?.map(|s| s.as_bytes().to_vec()).unwrap_or_default();
            Ok(super::sha1hex(&s))
        })?,
    )?;
    let (globals, env): (Table, Table) =
        lua.load(PRELUDE).set_name("=redis").call((hidden.clone(), crate::cmd::connection::REDIS_VERSION))?;
    Ok((hidden, globals, env))
}
