# frozen_string_literal: true

require "zlib"

module SolidJobs
  # Storage and delivery sit behind a backend adapter. Each channel is routed
  # to one backend (`config.channel_backends`, default `config.backend`).
  # See README "Backends" for the capability matrix.
  module Backends
    # Raised when a backend cannot honor an operation. Nothing degrades
    # silently into a weaker guarantee.
    class NotSupported < Error; end

    CAPABILITIES = %i[at_least_once retries scheduling crash_recovery deduplication fencing lease_extension get cancel
                      durability unique recurring pause concurrency_limits priority rate_limits].freeze

    # A claimed job, for callers of the adapter API (tools, tests; workers
    # use the native dispatcher). `reservation` names who holds it (the
    # adapter's node on Redis, the job on SolidEngine) and `fence` is the
    # fencing token every settle is checked against. `raw` is the envelope
    # as stored.
    Claim = Struct.new(:job_id, :channel, :envelope, :reservation, :fence, :raw, keyword_init: true)

    ADAPTERS = {solid_redis: "Redis", redis: "Redis", solid_engine: "SolidEngine"}.freeze

    module_function

    def build(name, spec, config)
      adapter = spec.fetch(:adapter) do
        raise ConfigurationError, "backend #{name.inspect} needs an :adapter (solid_redis or solid_engine)"
      end
      klass = ADAPTERS[adapter.to_sym] or
        raise ConfigurationError, "backend #{name.inspect} has unknown adapter #{adapter.inspect}; " \
                                  "use solid_redis or solid_engine"
      const_get(klass).new(name, spec, config)
    end

    # Engine channel id: CRC32 of the channel name, unless the backend spec
    # maps it explicitly (`channel_ids: {"critical" => 1}`).
    def channel_id(name, explicit = nil)
      (explicit && (explicit[name] || explicit[name.to_sym])) || Zlib.crc32(name)
    end
  end
end

require "solid_jobs/backends/base"
require "solid_jobs/backends/redis"
require "solid_jobs/backends/solid_engine"
require "solid_jobs/routing"
