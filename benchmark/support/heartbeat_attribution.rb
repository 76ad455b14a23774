# frozen_string_literal: true

require "digest"

module Bench
  # Splits the commands a SolidJobs node ran while idle into its heartbeat
  # tick and everything else, from MONITOR entries (redis_monitor.rb).
  #
  # The heartbeat is one EVALSHA of crates/solid_core/lua/heartbeat.lua (the
  # node loads it with the shared Lua prelude prepended, and the allow-oom
  # shebang line before that, see scripts.rs),
  # recognised by its SHA1 (how Redis names a loaded script); the commands
  # the script runs itself (SET, SADD, LLEN, SMEMBERS, EXISTS...) follow its
  # EVALSHA line with source "lua" and belong to it. The heartbeat thread
  # sends the telemetry journal and observations (XADD, HSET, PEXPIRE) in
  # the same pipelined round trip, on the same connection: those belong to
  # the tick too. Anything else is beyond the heartbeat.
  class HeartbeatAttribution
    LUA_DIR = File.expand_path("../../crates/solid_core/lua", __dir__)
    SCRIPT_CALLS = %w[evalsha evalsha_ro].freeze

    attr_reader :shas

    def initialize(lua_dir = LUA_DIR)
      body = File.read(File.join(lua_dir, "heartbeat.lua"))
      prelude = File.read(File.join(lua_dir, "prelude.lua"))
      shebang = File.read(File.join(lua_dir, "../src/redis/scripts.rs"))[/^const ALLOW_OOM: &str = "([^"]+)";/, 1]
      sources = [body, "#{prelude}\n#{body}"]
      sources += sources.map { |source| "#{shebang}\n#{source}" } if shebang
      @shas = sources.map { |source| Digest::SHA1.hexdigest(source) }
    end

    def sha = @shas.join(" or ")

    # {command name => calls} of the heartbeat tick among `entries`.
    def heartbeat_calls(entries)
      tick_sources = entries.select { |e| heartbeat_script?(e) }.map(&:source).uniq
      calls = Hash.new(0)
      in_heartbeat = false
      entries.each do |entry|
        in_heartbeat = heartbeat_script?(entry) unless entry.lua?
        calls[entry.name] += 1 if in_heartbeat || tick_sources.include?(entry.source)
      end
      calls
    end

    private

    # The node loads its scripts once and then calls them by SHA, so in an
    # idle window the heartbeat only ever arrives as EVALSHA.
    def heartbeat_script?(entry)
      SCRIPT_CALLS.include?(entry.name) && @shas.any? { |sha| entry.args.first.to_s.casecmp?(sha) }
    end
  end
end
