# frozen_string_literal: true

module SolidJobs
  module Backends
    # The adapter API every backend implements. Producers use enqueue and
    # schedule; the other operations serve tools and tests (workers claim
    # through the native dispatcher, which uses the same storage rules).
    class Base
      attr_reader :name

      # `config` is read here, not kept: backends are made Ractor-shareable,
      # which would freeze whatever they hold.
      def initialize(name, spec, _config)
        @name = name
        @spec = spec.dup.freeze
      end

      # Name and URL, redacted: never the spec (it may hold a password).
      def inspect
        Native.redact("#<#{self.class.name} #{name.inspect} url=#{(defined?(@client) && @client&.url).inspect}>")
      end

      def pretty_print(printer) = printer.text(inspect)

      # {capability => true/false} for every entry of CAPABILITIES.
      def capabilities = raise(NotImplementedError)

      def supports?(capability)
        capabilities.fetch(capability.to_sym) do
          raise ArgumentError, "unknown capability #{capability.inspect}; known: #{CAPABILITIES.inspect}"
        end
      end

      # Writes jobs of `task` (a class name) to `channel`; returns their ids.
      def enqueue(task, argument_lists, channel:, max_failures:) = push(task, argument_lists, channel, max_failures, nil)

      # Like enqueue, ready at `at` (a Time or epoch seconds).
      def schedule(task, argument_lists, channel:, max_failures:, at:)
        epoch = at.is_a?(Time) ? at.to_f : Float(at)
        push(task, argument_lists, channel, max_failures, (epoch * 1000).round)
      end

      def push(_task, _argument_lists, _channel, _max_failures, _due_ms) = raise(NotImplementedError)
      def push_envelopes(_envelopes, _due_ms) = raise(NotImplementedError)
      # Claims one job of `channel` (a Claim, or nil when there is none).
      # ack, retry_job and fail_job settle it; each raises StaleClaimError
      # when the claim was recovered meanwhile, and then changes nothing.
      def claim(_channel) = not_supported!(:claim)
      def ack(_claim) = not_supported!(:ack)
      def retry_job(_claim, delay:) = not_supported!(:retry_job)
      def fail_job(_claim, reason: "failed") = not_supported!(:fail_job)
      def extend_lease(_claim, _seconds) = not_supported!(:extend_lease)
      def get_job(_id) = not_supported!(:get_job)
      def cancel(_id) = not_supported!(:cancel)
      def recover = not_supported!(:recover)
      # Pausing channels (SolidJobs::Channels): true when it changed the
      # channel's state; paused_channels is {name => {"paused_ms", "by"}}.
      def pause_channel(_channel, by: nil) = not_supported!(:pause_channel)
      def resume_channel(_channel) = not_supported!(:resume_channel)
      def paused_channels = not_supported!(:paused_channels)

      # The worker-side source settings Hash for Native::Dispatcher (keys in
      # ext/solid_jobs/src/helpers/settings.rs), for `channels`
      # ([[name, weight], ...]) routed to this backend.
      def source_spec(_channels, config:, node_id:, description:) = raise(NotImplementedError)

      private

      def decode(raw)
        Native.decode_envelope(raw)
      rescue EnvelopeError
        nil
      end

      # Whole milliseconds of a duration in seconds, as the native settle
      # calls take them; a negative duration counts as none.
      def milliseconds(seconds) = [(seconds * 1000).round, 0].max

      def not_supported!(operation)
        raise NotSupported, "the #{self.class.name.split("::").last} backend #{name.inspect} cannot #{operation}"
      end
    end
  end
end
