# frozen_string_literal: true

module SolidJobs
  # Ractor.make_shareable without its half-frozen failure. make_shareable
  # freezes each object as it enters it and raises at the first one it
  # cannot share, so a refused graph stays partly frozen: an instrumenter
  # holding `Logger.new($stdout)` froze $stdout on its way to the Logger's
  # Monitor. `obstacle` walks the same graph first and changes nothing; only
  # when it finds no obstacle is make_shareable called. Every place that
  # makes a user's object shareable (the instrumenter, DSL blocks, the
  # configuration at worker start) goes through here.
  #
  # The walk reads object headers and instance variables natively
  # (Native.shareability, Native.instance_values) and uses core methods
  # bound to each object, so it calls no method a user class overrides.
  module Shareable
    ARRAY_EACH = Array.instance_method(:each)
    HASH_EACH_PAIR = Hash.instance_method(:each_pair)
    HASH_DEFAULT = Hash.instance_method(:default)
    HASH_DEFAULT_PROC = Hash.instance_method(:default_proc)
    STRUCT_MEMBERS = Struct.instance_method(:members)
    STRUCT_VALUES = Struct.instance_method(:to_a)
    RANGE_BEGIN = Range.instance_method(:begin)
    RANGE_END = Range.instance_method(:end)
    CLASS_OF = Kernel.instance_method(:class)
    MODULE_NAME = Module.instance_method(:name)

    module_function

    # Deep-freezes `object` for worker Ractors, or raises ConfigurationError
    # ("#{what} must be Ractor-shareable because #{why} ...") and leaves it
    # as it was.
    def share!(object, what, why)
      reason = obstacle(object, what)
      raise ConfigurationError, "#{what} must be Ractor-shareable because #{why}: #{reason}; nothing was frozen" if reason

      Ractor.make_shareable(object)
    end

    # nil when Ractor.make_shareable(object) would succeed; otherwise where
    # (a path from `label`) and why it would not. Changes nothing.
    def obstacle(object, label = "it")
      seen = {}.compare_by_identity
      pending = [[object, label]]
      until pending.empty?
        current, path = pending.pop
        next if Ractor.shareable?(current) || seen.key?(current)

        seen[current] = true
        reason = refusal(current, path) { |child, child_path| pending << [child, child_path] }
        return reason if reason
      end
      nil
    end

    # Why make_shareable would refuse `object` itself (nil if it would
    # not); yields the objects it would visit next.
    def refusal(object, path, &visit)
      case Native.shareability(object)
      when :refused then "#{path} is a #{class_name(object)}, which cannot be shared between Ractors"
      when :proc then (why = proc_refusal(object)) && "#{path} is a Proc that cannot be shared (#{why})"
      when :frozen_data then nil # a C type declared shareable once frozen
      else
        references(object, path, &visit)
        nil
      end
    end

    # A Proc is checked on a copy (RactorCompat.shareable_proc shares a
    # copy on every Ruby): sharing it isolates the copy's captured variables
    # and never freezes its self or what they hold (it raises instead), so
    # the original is untouched either way.
    def proc_refusal(block)
      RactorCompat.shareable_proc(block)
      nil
    rescue Ractor::Error, TypeError, ArgumentError => e
      e.message
    end

    # What make_shareable visits after freezing `object`: its instance
    # variables (internal ones too), elements, keys and values, a Hash's
    # default, Struct members and Range ends.
    def references(object, path)
      Native.instance_values(object).each { |name, value| yield value, "#{path}.#{name}" }
      case object
      when Array
        index = 0
        ARRAY_EACH.bind_call(object) do |element|
          yield element, "#{path}[#{index}]"
          index += 1
        end
      when Hash
        HASH_EACH_PAIR.bind_call(object) do |key, value|
          shown = describe_key(key)
          yield key, "#{path} key #{shown}"
          yield value, "#{path}[#{shown}]"
        end
        default_proc = HASH_DEFAULT_PROC.bind_call(object)
        yield default_proc, "#{path}'s default proc" if default_proc
        default = HASH_DEFAULT.bind_call(object)
        yield default, "#{path}'s default" unless default.nil?
      when Struct
        STRUCT_MEMBERS.bind_call(object).zip(STRUCT_VALUES.bind_call(object)) do |member, value|
          yield value, "#{path}.#{member}"
        end
      when Range
        yield RANGE_BEGIN.bind_call(object), "#{path}.begin"
        yield RANGE_END.bind_call(object), "#{path}.end"
      end
    end

    def describe_key(key)
      case key
      when Symbol, Integer, true, false, nil then key.inspect
      when String then String.new(key).inspect
      else "(a #{class_name(key)})"
      end
    end

    def class_name(object)
      MODULE_NAME.bind_call(CLASS_OF.bind_call(object)) || "instance of an anonymous class"
    end
  end
end
