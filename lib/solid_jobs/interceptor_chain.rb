# frozen_string_literal: true

module SolidJobs
  # An ordered list of interceptor classes. Each interceptor implements
  # `around(context)` and yields to continue. Classes (not instances) are
  # stored so the chain is Ractor-shareable; instances are made per call
  # inside whichever Ractor runs the job.
  class InterceptorChain
    def initialize
      @entries = []
    end

    def use(klass, *args)
      unless Class === klass && Reflection.method_defined?(klass, :around)
        shown = Class === klass ? Reflection.name(klass) || "an anonymous class" : klass.inspect
        raise ConfigurationError, "interceptor #{shown} must be a class with an instance method around(context)"
      end

      @entries << [klass, args.freeze].freeze
      self
    end

    # Copies share the (frozen) entries, not the list: `use` on a copy
    # leaves the original chain as it was.
    def initialize_copy(source)
      super
      @entries = @entries.dup
    end

    def empty? = @entries.empty?
    def size = @entries.size
    def classes = @entries.map(&:first)

    def freeze
      @entries.freeze
      super
    end

    # Runs the block inside every interceptor's around, first-added outermost.
    def invoke(context, &block)
      return yield if @entries.empty?

      run_from(0, context, block)
    end

    private

    def run_from(index, context, block)
      return block.call if index == @entries.size

      klass, args = @entries[index]
      result = nil
      klass.new(*args).around(context) { result = run_from(index + 1, context, block) }
      result
    end
  end
end
