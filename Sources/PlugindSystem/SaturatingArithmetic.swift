/// Arithmetic that stops at the type's bounds instead of trapping, for counters that come from
/// what another process can write (statistics pages, activity records): a hostile value must
/// never stop the reader, and a counter at its bound says enough.
extension FixedWidthInteger {
    /// `self + other`, or the bound it passed.
    package func addingSaturating(_ other: Self) -> Self {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, or the bound it passed.
    package func subtractingSaturating(_ other: Self) -> Self {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other > 0 ? .min : .max
    }

    /// `self * other`, or the bound it passed.
    package func multipliedSaturating(by other: Self) -> Self {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }
}
