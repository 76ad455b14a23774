# frozen_string_literal: true

module SolidJobs
  # Which backend serves each channel, built once from the configuration
  # and made shareable, so worker Ractors can enqueue too.
  class Routing
    attr_reader :backends

    def self.build(config)
      specs = config.backends.dup
      specs[:redis] ||= {adapter: :solid_redis, url: config.redis_url}
      if config.backend == :solid_engine && !specs.key?(:solid_engine)
        unless config.url
          raise ConfigurationError, "config.backend = :solid_engine needs config.url (unix:///path or tcp://host:port)"
        end

        specs[:solid_engine] = {adapter: :solid_engine, url: config.url}
      end
      used = ([config.backend] + config.channel_backends.values).uniq
      missing = used - specs.keys
      raise ConfigurationError, "unknown backend(s) #{missing.inspect}; configured: #{specs.keys.inspect}" unless missing.empty?

      backends = used.to_h { |name| [name, Backends.build(name, specs.fetch(name), config)] }
      Ractor.make_shareable(new(backends, config.backend, config.channel_backends))
    end

    def initialize(backends, default, channel_backends)
      @backends = backends.freeze
      @default = default
      @channel_backends = channel_backends.transform_keys(&:to_s).freeze
    end

    def backend_for(channel)
      @backends.fetch(@channel_backends.fetch(channel.to_s, @default))
    end

    # [[backend, [[channel, weight], ...]], ...] for the channels a worker serves.
    def group(channels)
      channels.group_by { |name, _| backend_for(name) }.to_a
    end

    # The Redis backend's client (archive, integrity check, raw commands),
    # when Redis is used.
    def redis
      @backends.values.find { |b| b.is_a?(Backends::Redis) }
    end
  end
end
