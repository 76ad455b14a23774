# frozen_string_literal: true

require "digest"
require_relative "common"

module Bench
  # The Lua scripts of solid_core as Redis knows them: by the SHA1 of their
  # source. scripts.rs builds each script from its file under lua/, with
  # prelude.lua prepended (`with_prelude`) or not (`Script::new`), and with
  # the allow-oom shebang line first (`allowing_oom`,
  # `allowing_oom_with_prelude`); this reads those choices from scripts.rs
  # itself, so a script added or moved is named here without a change.
  module ScriptNames
    CORE = File.expand_path("../../crates/solid_core", __dir__)
    SCRIPTS = "src/redis/scripts.rs"
    KINDS = "allowing_oom_with_prelude|allowing_oom|with_prelude|Script::new"
    DECLARATION = %r{^\s*(\w+): (#{KINDS})\(include_str!\("(?:\.\./)+lua/(\w+)\.lua"\)\)}
    SHEBANG = /^const ALLOW_OOM: &str = "([^"]+)";/

    module_function

    # {script name => source} exactly as redis-rs sends them.
    def sources
      @sources ||= begin
        prelude = File.read(File.join(CORE, "lua/prelude.lua"))
        declarations = File.read(File.join(CORE, SCRIPTS))
        shebang = declarations[SHEBANG, 1]
        found = declarations.scan(DECLARATION).to_h do |name, kind, file|
          source = File.read(File.join(CORE, "lua/#{file}.lua"))
          source = "#{prelude}\n#{source}" if kind.end_with?("with_prelude")
          source = "#{shebang}\n#{source}" if kind.start_with?("allowing_oom")
          [name, source]
        end
        raise Failure, "no script declarations found in #{CORE}/#{SCRIPTS} (has its layout changed?)" if found.empty?

        found.freeze
      end
    end

    # {sha1 => script name}
    def by_sha
      @by_sha ||= sources.to_h { |name, source| [Digest::SHA1.hexdigest(source), name] }.freeze
    end

    # Loads every script, so no measured call pays for redis-rs's first-use
    # path (EVALSHA answered NOSCRIPT, SCRIPT LOAD, EVALSHA again).
    def preload(redis)
      sources.each_value { |source| redis.script(:load, source) }
    end
  end
end
